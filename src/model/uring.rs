//! `io-uring`: completions instead of readiness. One thread drives one ring
//! (`crate::sys::uring_server`, which owns the unsafe part): the kernel tells it what
//! has been done (a connection accepted, bytes received, bytes sent), never what could
//! be done, and every wake-up submits and reaps for all connections at once.
//!
//! - One multishot accept on the listener delivers every new connection (one accept per
//!   submission on kernels before 5.19).
//! - Each connection has one multishot receive, which the kernel fills from a ring of
//!   provided buffers; the bytes are copied into the
//!   [`Session`](crate::http::Session) and the buffer goes straight back (one receive
//!   per submission, into a buffer of the ring's, before 6.0).
//! - Answers are copied out of the session (at most 256 KiB at a time) into the
//!   connection's send buffer, since the session's own may grow while the kernel reads,
//!   and sent with `IORING_OP_SEND`, one send in flight per connection; a short send
//!   goes on from where it stopped.
//! - While the session wants no input (its answers wait unsent, or it answered with
//!   `Connection: close`) the receive is cancelled; what arrived meanwhile is kept and
//!   fed in later, so a client that sends without reading cannot make it buffer without
//!   bound.
//! - A connection is closed once none of its operations is in flight: its receive and
//!   send are cancelled first, and their completions awaited (closing the descriptor
//!   alone would not end them: the ring holds the socket open).
//! - The loop waits at most [`STOP_CHECK`](super::STOP_CHECK) (a timed
//!   `io_uring_enter`), so it sees a stop within it, and sweeps idle connections every
//!   [`TICK`](super::TICK); a signal ends the wait at once. On a stop it cancels
//!   everything and drains the ring (for at most half a second).
//!
//! Each fallback is taken when the kernel lacks the better way: it rejects a multishot
//! operation with `EINVAL`, will not register a provided-buffer ring, or does not offer
//! timed waits (then a timeout submission wakes the loop). A build with the
//! `test-hooks` feature takes them all from the start with
//! `SOCKBENCH_TEST_FAULT=uring-old-kernel`.
//!
//! Why one ring on one thread, like `epoll`, and not a ring per thread on SO_REUSEPORT
//! listeners: on the two-core machine it was measured on, with the client on the same
//! machine, two rings were no faster than one (within the noise, and no less CPU per
//! request), since the client needs a core too; one ring already batches every
//! connection's receives and sends into one `io_uring_enter` per wake-up (about three
//! requests each under `wrk -c 50`). So the model has a fixed shape
//! ([`ModelKind::takes_threads`](super::ModelKind::takes_threads)); `epoll-workers` is
//! the model for a loop per CPU.

use super::{Ctx, Listener};

/// Whether the model can run here (a build with the `io-uring` feature, on a kernel that
/// lets this process set up a ring).
///
/// # Errors
/// Why not.
#[cfg(not(feature = "io-uring"))]
pub fn available() -> Result<(), String> {
    Err("this build has no io-uring support (built without the io-uring feature)".into())
}

/// Serve until the stop (never, in this build).
///
/// # Errors
/// Always: the build has no io_uring support.
#[cfg(not(feature = "io-uring"))]
pub fn serve(_listener: Listener, _ctx: &Ctx) -> anyhow::Result<crate::http::Counters> {
    anyhow::bail!("this build has no io-uring support (built without the io-uring feature)")
}

#[cfg(feature = "io-uring")]
pub use enabled::{available, serve};

#[cfg(feature = "io-uring")]
mod enabled {
    use std::io;
    use std::os::fd::{AsRawFd, RawFd};
    use std::time::{Duration, Instant};

    use anyhow::Context;
    use nix::libc;
    use socket2::{SockAddr, Socket};

    use super::{Ctx, Listener};
    use crate::http::{Counters, Session, Site};
    use crate::model::{is_exhaustion, is_hangup, End, STOP_CHECK, TICK};
    use crate::sys::uring_server::{Completion, OpId, Received, ServerRing};

    /// Submission queue entries (completions: four times as many).
    const ENTRIES: u32 = 1024;
    /// Longest a stop waits for the ring to drain.
    const DRAIN: Duration = Duration::from_millis(500);
    /// Most answer bytes copied for one send (a large body goes in pieces).
    const SEND_CHUNK: usize = 256 * 1024;

    /// Whether the model can run here.
    ///
    /// # Errors
    /// Why not: io_uring disabled by `kernel.io_uring_disabled`, blocked (seccomp, a
    /// container's policy) or too old.
    pub fn available() -> Result<(), String> {
        if std::env::var_os("SOCKBENCH_TEST_NO_IO_URING").is_some() {
            return Err("io_uring is unavailable (disabled for this test)".into());
        }
        crate::sys::uring_server::probe().map_err(|e| explain(&e))
    }

    /// Why io_uring cannot be used, and what to do.
    fn explain(e: &io::Error) -> String {
        if e.kind() == io::ErrorKind::Unsupported {
            return format!("{e}; use --model epoll");
        }
        match crate::environment::read_sysctl("kernel/io_uring_disabled")
            .filter(|v| v.trim() != "0")
        {
            Some(v) => format!(
                "io_uring is disabled on this system (kernel.io_uring_disabled = {}): {e}; allow it with \
                 `sysctl -w kernel.io_uring_disabled=0` (as root), or use --model epoll",
                v.trim()
            ),
            None => format!(
                "io_uring is unavailable here: {e} (a seccomp filter or container policy may block it); \
                 use --model epoll"
            ),
        }
    }

    /// Serve on this thread until [`Ctx::stopping`].
    ///
    /// # Errors
    /// The ring cannot be set up or waited on, or the thread cannot be pinned.
    pub fn serve(listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
        ctx.pin_thread()?;
        // The ring waits for the listener itself; old kernels fail a nonblocking one's
        // accepts with EAGAIN instead of waiting.
        listener.socket.set_nonblocking(false)?;
        // Tests reach the fallbacks with SOCKBENCH_TEST_FAULT=uring-old-kernel.
        let old = crate::testhooks::fault("uring-old-kernel");
        let ring = ServerRing::new(ENTRIES, old).map_err(|e| anyhow::anyhow!(explain(&e)))?;
        if ctx.site.verbose >= 1 {
            crate::http::log(format_args!("io-uring: {}", ring.features()));
        }
        let mut server = Server {
            ctx,
            ring,
            lfd: listener.socket.as_raw_fd(),
            tcp: listener.is_tcp(),
            local: listener.addr.clone(),
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            accept: None,
            accept_again: None,
            stopping: false,
            c: Counters::default(),
        };
        let result = server.run();
        // The ring cancels and drains what is left (or leaks its memory) while the
        // sockets are still open; then they close, the listener last.
        drop(server.ring);
        abandon(&mut server.slots, ctx, &mut server.c);
        drop(listener);
        result.map(|()| server.c)
    }

    /// One connection.
    struct Conn {
        sock: Socket,
        session: Session,
        /// When a byte last arrived or left.
        last: Instant,
        /// The receive in flight, and whether it has been cancelled.
        recv: Option<OpId>,
        recv_cancelled: bool,
        /// The send in flight (its buffer is the ring's until it completes).
        send: Option<OpId>,
        /// The send buffer, while no send is in flight.
        spare: Vec<u8>,
        /// Bytes that arrived while the session wanted none.
        pending: Vec<u8>,
        /// Closing: how it ended, once its operations have completed.
        end: Option<End>,
    }

    /// A place for a connection; the generation tells its occupants apart.
    struct Slot {
        gen: u32,
        conn: Option<Conn>,
    }

    struct Server<'a> {
        ctx: &'a Ctx,
        ring: ServerRing,
        lfd: RawFd,
        tcp: bool,
        /// The listener's address: what the log would show for a peer, were it shown.
        local: SockAddr,
        slots: Vec<Slot>,
        free: Vec<usize>,
        /// Connections in `slots`.
        live: usize,
        /// The accept in flight.
        accept: Option<OpId>,
        /// Accepting paused (out of descriptors) until then.
        accept_again: Option<Instant>,
        stopping: bool,
        c: Counters,
    }

    const GEN_MASK: u32 = 0xff_ffff;

    fn token(i: usize, gen: u32) -> u64 {
        (u64::from(gen & GEN_MASK) << 32) | i as u64
    }

    fn errno(e: &io::Error) -> i32 {
        e.raw_os_error().unwrap_or(0)
    }

    /// Give `data` to the session while it wants input; keep the rest for later (unless
    /// the session will read nothing more).
    fn feed(conn: &mut Conn, mut data: &[u8], site: &Site, c: &mut Counters) {
        if conn.pending.is_empty() {
            while !data.is_empty() && conn.session.wants_read() {
                let buf = conn.session.read_buf();
                let n = buf.len().min(data.len());
                if n == 0 {
                    break;
                }
                buf[..n].copy_from_slice(&data[..n]);
                conn.session.received(n, site, c);
                data = &data[n..];
            }
        }
        if !data.is_empty() && !conn.session.closed_by_server() {
            conn.pending.extend_from_slice(data);
        }
    }

    impl Server<'_> {
        fn run(&mut self) -> anyhow::Result<()> {
            let mut events = Vec::with_capacity(256);
            let mut last_sweep = Instant::now();
            let mut stop_at: Option<Instant> = None;
            loop {
                let now = Instant::now();
                if stop_at.is_none() && self.ctx.stopping() {
                    stop_at = Some(now);
                    self.stop();
                }
                if let Some(t) = stop_at {
                    let drained = self.live == 0 && self.accept.is_none();
                    if drained || now.duration_since(t) >= DRAIN {
                        return Ok(());
                    }
                } else if self.accept.is_none() && !matches!(self.accept_again, Some(t) if now < t)
                {
                    self.arm_accept(now);
                }
                self.ring
                    .wait(STOP_CHECK)
                    .context("io_uring_enter failed")?;
                self.ring.completions(&mut events);
                let now = Instant::now();
                for ev in events.drain(..) {
                    self.handle(ev, now);
                }
                if now.duration_since(last_sweep) >= TICK {
                    last_sweep = now;
                    self.sweep(now);
                }
            }
        }

        fn arm_accept(&mut self, now: Instant) {
            self.accept_again = None;
            match self.ring.accept(self.lfd) {
                Ok(op) => self.accept = Some(op),
                Err(e) => {
                    if self.ctx.site.verbose >= 1 {
                        crate::http::log(format_args!("io-uring: cannot submit an accept: {e}"));
                    }
                    self.accept_again = Some(now + TICK);
                }
            }
        }

        fn handle(&mut self, ev: Completion, now: Instant) {
            match ev {
                Completion::Accepted { result, more } => {
                    if !more {
                        self.accept = None;
                    }
                    match result {
                        Ok(fd) => self.admit(Socket::from(fd), now),
                        Err(e) => self.accept_failed(&e, now),
                    }
                }
                Completion::Received {
                    token,
                    result,
                    more,
                } => self.received(token, result, more, now),
                Completion::Sent {
                    token,
                    result,
                    buf,
                    off,
                } => self.sent(token, result, buf, off, now),
            }
        }

        fn accept_failed(&mut self, e: &io::Error, now: Instant) {
            // A network error accept(2) says to retry after (as `accept_nonblocking`
            // does) is no failure.
            if crate::model::is_network_error(e) {
                return;
            }
            match errno(e) {
                // Cancelled at the stop, or interrupted.
                libc::ECANCELED | libc::EINTR | libc::EAGAIN => {}
                libc::EINVAL if self.ring.multishot_accept() => {
                    // A kernel before 5.19: one accept per submission from now on.
                    self.ring.disable_multishot_accept();
                    if self.ctx.site.verbose >= 1 {
                        crate::http::log(format_args!(
                            "io-uring: no multishot accept here; accepting one at a time"
                        ));
                    }
                }
                _ => {
                    self.ctx.refused(format!("accept failed: {e}"), &mut self.c);
                    if is_exhaustion(e) {
                        self.accept_again = Some(now + TICK);
                    }
                }
            }
        }

        fn admit(&mut self, sock: Socket, now: Instant) {
            if self.tcp {
                let _ = sock.set_nodelay(true);
            }
            let id = self.ctx.next_id();
            // A multishot accept gives no peer address, and asking costs a system call:
            // only the log at -v 2 shows it.
            if self.ctx.site.verbose >= 2 {
                let peer = sock.peer_addr().unwrap_or_else(|_| self.local.clone());
                self.ctx.accepted(id, &peer, &mut self.c);
            } else {
                self.ctx.accepted(id, &self.local, &mut self.c);
            }
            let i = self.free.pop().unwrap_or_else(|| {
                self.slots.push(Slot { gen: 0, conn: None });
                self.slots.len() - 1
            });
            self.slots[i].conn = Some(Conn {
                sock,
                session: Session::new(id),
                last: now,
                recv: None,
                recv_cancelled: false,
                send: None,
                spare: Vec::new(),
                pending: Vec::new(),
                end: None,
            });
            self.live += 1;
            if self.stopping {
                self.begin_close(i, End::Stopped);
            }
            self.drive(i);
        }

        /// The slot of the connection `token` names, if it is still there.
        fn lookup(&self, token: u64) -> Option<usize> {
            let i = (token & 0xffff_ffff) as usize;
            let slot = self.slots.get(i)?;
            (slot.conn.is_some() && u64::from(slot.gen & GEN_MASK) == token >> 32).then_some(i)
        }

        fn received(&mut self, token: u64, result: io::Result<Received>, more: bool, now: Instant) {
            let Some(i) = self.lookup(token) else {
                if let Ok(r) = result {
                    self.ring.consume(r, |_| ());
                }
                return;
            };
            let Server {
                ring,
                slots,
                ctx,
                c,
                ..
            } = self;
            let conn = slots[i].conn.as_mut().expect("looked up");
            if !more {
                conn.recv = None;
                conn.recv_cancelled = false;
            }
            let mut end = None;
            match result {
                Ok(r) if r.is_empty() => {
                    ring.consume(r, |_| ());
                    conn.session.peer_closed();
                }
                Ok(r) => {
                    if conn.end.is_some() {
                        ring.consume(r, |_| ());
                    } else {
                        ring.consume(r, |d| feed(conn, d, &ctx.site, c));
                    }
                    // Part of a request is no sign of life (a head dribbled a byte at a
                    // time): only a whole one restarts the idle clock.
                    if !conn.session.mid_request() {
                        conn.last = now;
                    }
                }
                // Cancelled by us; or the provided buffers ran out (receive again).
                Err(e) if matches!(errno(&e), libc::ECANCELED | libc::ENOBUFS) => {}
                Err(e) if errno(&e) == libc::EINVAL && ring.multishot_recv() => {
                    // A kernel before 6.0: one receive per submission from now on.
                    ring.disable_multishot_recv();
                    if ctx.site.verbose >= 1 {
                        crate::http::log(format_args!(
                            "io-uring: no multishot receive here; receiving one at a time"
                        ));
                    }
                }
                Err(e) if is_hangup(&e) => {
                    conn.session.peer_closed();
                    end = Some(End::Finished);
                }
                Err(e) => end = Some(End::Error(e)),
            }
            if let Some(end) = end {
                self.begin_close(i, end);
            }
            self.drive(i);
        }

        fn sent(
            &mut self,
            token: u64,
            result: io::Result<usize>,
            buf: Vec<u8>,
            off: usize,
            now: Instant,
        ) {
            let Some(i) = self.lookup(token) else {
                return;
            };
            let tok = token;
            let Server {
                ring,
                slots,
                ctx,
                c,
                ..
            } = self;
            let conn = slots[i].conn.as_mut().expect("looked up");
            conn.send = None;
            let mut end = None;
            match result {
                Ok(0) => end = Some(End::Error(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    // A client downloading a long answer is not idle.
                    conn.last = now;
                    conn.session.sent(n, &ctx.site, c);
                    let off = off + n;
                    if off < buf.len() && conn.end.is_none() {
                        // A short send: the rest, from the same copy (the session's
                        // output starts with it).
                        match ring.send(conn.sock.as_raw_fd(), tok, buf, off) {
                            Ok(op) => conn.send = Some(op),
                            Err(e) => end = Some(End::Error(e)),
                        }
                    } else {
                        conn.spare = buf;
                    }
                }
                Err(e) if errno(&e) == libc::ECANCELED => conn.spare = buf,
                Err(e) if is_hangup(&e) => end = Some(End::Finished),
                Err(e) => end = Some(End::Error(e)),
            }
            if let Some(end) = end {
                self.begin_close(i, end);
            }
            self.drive(i);
        }

        /// Submit what the connection needs next: a send of its answers, a receive when
        /// it wants input (or the receive's cancellation when it wants none), and its
        /// close when it is done.
        fn drive(&mut self, i: usize) {
            let tok = token(i, self.slots[i].gen);
            let Server {
                ring,
                slots,
                ctx,
                c,
                ..
            } = self;
            let Some(conn) = slots[i].conn.as_mut() else {
                return;
            };
            let mut end = None;
            if conn.end.is_none() {
                if !conn.pending.is_empty() && conn.session.wants_read() {
                    let held = std::mem::take(&mut conn.pending);
                    feed(conn, &held, &ctx.site, c);
                }
                let fd = conn.sock.as_raw_fd();
                if conn.send.is_none() && !conn.session.output().is_empty() {
                    let out = conn.session.output();
                    let mut buf = std::mem::take(&mut conn.spare);
                    buf.clear();
                    buf.extend_from_slice(&out[..out.len().min(SEND_CHUNK)]);
                    match ring.send(fd, tok, buf, 0) {
                        Ok(op) => conn.send = Some(op),
                        Err(e) => end = Some(End::Error(e)),
                    }
                }
                if end.is_some() {
                    // Closing on the failed submission.
                } else if conn.session.finished() {
                    end = Some(End::Finished);
                } else if conn.session.wants_read() {
                    if conn.recv.is_none() && conn.pending.is_empty() {
                        match ring.recv(fd, tok) {
                            Ok(op) => conn.recv = Some(op),
                            Err(e) => end = Some(End::Error(e)),
                        }
                    }
                } else if let (Some(op), false) = (conn.recv, conn.recv_cancelled) {
                    // Paused: the session wants no input until its answers are sent.
                    conn.recv_cancelled = true;
                    if let Err(e) = ring.cancel(op) {
                        end = Some(End::Error(e));
                    }
                }
            }
            if let Some(end) = end {
                self.begin_close(i, end);
            }
            self.finish_if_quiet(i);
        }

        /// Mark connection `i` as closing: cancel what it has in flight.
        fn begin_close(&mut self, i: usize, end: End) {
            let Some(conn) = self.slots[i].conn.as_mut() else {
                return;
            };
            if conn.end.is_some() {
                return;
            }
            conn.end = Some(end);
            if let (Some(op), false) = (conn.recv, conn.recv_cancelled) {
                conn.recv_cancelled = true;
                let _ = self.ring.cancel(op);
            }
            if let Some(op) = conn.send {
                let _ = self.ring.cancel(op);
            }
        }

        /// Close connection `i` if it is closing and nothing of it is in flight.
        fn finish_if_quiet(&mut self, i: usize) {
            let slot = &mut self.slots[i];
            let quiet = slot
                .conn
                .as_ref()
                .is_some_and(|k| k.end.is_some() && k.recv.is_none() && k.send.is_none());
            if !quiet {
                return;
            }
            let conn = slot.conn.take().expect("checked");
            slot.gen = slot.gen.wrapping_add(1);
            let end = conn.end.expect("checked");
            self.ctx.closed(&conn.session, end, &mut self.c);
            drop(conn.sock);
            self.free.push(i);
            self.live -= 1;
        }

        /// Close the connections where nothing moved within the idle timeout.
        fn sweep(&mut self, now: Instant) {
            for i in 0..self.slots.len() {
                let idle = self.slots[i].conn.as_ref().is_some_and(|k| {
                    k.end.is_none() && now.duration_since(k.last) >= self.ctx.idle_timeout
                });
                if idle {
                    self.begin_close(i, End::Idle);
                    self.finish_if_quiet(i);
                }
            }
        }

        /// Stop accepting and close every connection.
        fn stop(&mut self) {
            self.stopping = true;
            if let Some(op) = self.accept {
                let _ = self.ring.cancel(op);
            }
            for i in 0..self.slots.len() {
                self.begin_close(i, End::Stopped);
                self.finish_if_quiet(i);
            }
        }
    }

    /// Count and close the connections the drain did not finish.
    fn abandon(slots: &mut [Slot], ctx: &Ctx, c: &mut Counters) {
        for slot in slots {
            if let Some(conn) = slot.conn.take() {
                ctx.closed(&conn.session, conn.end.unwrap_or(End::Stopped), c);
            }
        }
    }
}

#[cfg(all(test, feature = "io-uring"))]
mod tests {
    use super::super::poll::tests::serves_every_kind_of_client;

    #[test]
    fn io_uring_serves_every_kind_of_client() {
        if super::available().is_err() {
            return;
        }
        serves_every_kind_of_client(super::serve, 1);
    }
}

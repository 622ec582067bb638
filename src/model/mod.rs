//! Server concurrency models: how `sockbench serve` waits for its connections. One file
//! per model; every model drives the same [`crate::http::Session`] per connection, so
//! they differ only in how they wait, never in what they answer or count.
//!
//! A model gets the bound [`Listener`] and the shared [`Ctx`] (the answers, the stop
//! condition, the idle timeout, the log), serves until [`Ctx::stopping`], closes every
//! connection and returns what it counted. Every wait a model's loops make is bounded by
//! [`STOP_CHECK`], so a stop (Ctrl-C, `--duration`) is seen within it (Ctrl-C is promised
//! to stop within 100 ms); idle connections are swept every [`TICK`], and an accept
//! that ran out of descriptors is tried again a tick later.

pub mod async_rt;
pub mod epoll;
pub mod poll;
pub mod pool;
pub mod select;
pub mod thread;
pub mod uring;

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use socket2::{SockAddr, Socket};

use crate::http::{Counters, Session, Site};

/// How often a model sweeps its idle connections (and tries an accept again after
/// running out of descriptors).
pub const TICK: Duration = Duration::from_millis(100);
/// Longest a model's loop waits before looking at the stop flag.
pub const STOP_CHECK: Duration = Duration::from_millis(20);

/// The models, as `--model` names them.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// A thread per connection, blocking calls.
    Thread,
    /// One epoll thread hands ready connections to a fixed pool of workers.
    Pool,
    /// One thread, select(2).
    Select,
    /// One thread, poll(2).
    Poll,
    /// One thread, epoll(7), edge-triggered.
    Epoll,
    /// An epoll loop per CPU, each with its own SO_REUSEPORT listener.
    EpollWorkers,
    /// Completions: io_uring with multishot accept and receive.
    IoUring,
    /// A tokio runtime, a task per connection.
    Async,
}

impl ModelKind {
    /// Every model, in the order `models` runs them.
    pub const ALL: [ModelKind; 8] = [
        ModelKind::Thread,
        ModelKind::Pool,
        ModelKind::Select,
        ModelKind::Poll,
        ModelKind::Epoll,
        ModelKind::EpollWorkers,
        ModelKind::IoUring,
        ModelKind::Async,
    ];

    /// The name `--model` takes.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Thread => "thread",
            ModelKind::Pool => "pool",
            ModelKind::Select => "select",
            ModelKind::Poll => "poll",
            ModelKind::Epoll => "epoll",
            ModelKind::EpollWorkers => "epoll-workers",
            ModelKind::IoUring => "io-uring",
            ModelKind::Async => "async",
        }
    }

    /// The model named `name`.
    ///
    /// # Errors
    /// An unknown name, with the list of known ones.
    pub fn parse(name: &str) -> Result<ModelKind, String> {
        let name = name.trim();
        // The D benchmark's `fiber` is a green thread per connection: tokio's tasks.
        let name = if name == "fiber" { "async" } else { name };
        ModelKind::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown model '{name}': use one of {}",
                    ModelKind::ALL.map(ModelKind::name).join(", ")
                )
            })
    }

    /// Whether this build and this kernel can run the model (the reason when not).
    pub fn available(self) -> Result<(), String> {
        match self {
            ModelKind::IoUring => uring::available(),
            ModelKind::Async => async_rt::available(),
            _ => Ok(()),
        }
    }

    /// Whether the model uses [`Ctx::threads`] (the others have a fixed shape).
    pub fn takes_threads(self) -> bool {
        matches!(
            self,
            ModelKind::Pool | ModelKind::EpollWorkers | ModelKind::Async
        )
    }
}

impl std::fmt::Display for ModelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The bound, listening socket, and how to make another on the same address.
#[derive(Debug)]
pub struct Listener {
    /// The listening socket (blocking; a model sets what it needs).
    pub socket: Socket,
    /// Its address (for SO_REUSEPORT siblings).
    pub addr: SockAddr,
    /// listen(2)'s backlog.
    pub backlog: i32,
}

impl Listener {
    /// Whether the listener is TCP (else a Unix stream socket).
    pub fn is_tcp(&self) -> bool {
        self.addr.as_socket().is_some()
    }

    /// Another listening socket for the same address: a new SO_REUSEPORT socket (the
    /// kernel spreads connections over them) for TCP, a duplicate of this one for Unix
    /// sockets (which have no SO_REUSEPORT; the loops then race for each accept).
    ///
    /// # Errors
    /// The socket cannot be made, bound or listened on.
    pub fn sibling(&self) -> io::Result<Socket> {
        if !self.is_tcp() {
            return self.socket.try_clone();
        }
        let s = Socket::new(self.addr.domain(), socket2::Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        if self.addr.is_ipv6() {
            s.set_only_v6(true)?;
        }
        s.bind(&self.addr)?;
        s.listen(self.backlog)?;
        Ok(s)
    }
}

/// What every model shares: the answers, when to stop, the limits and the log.
#[derive(Debug)]
pub struct Ctx {
    /// What every request is answered with.
    pub site: Site,
    /// Stop at this instant too (`--duration`).
    pub deadline: Option<Instant>,
    /// Threads for the models that take a number of them.
    pub threads: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// CPUs the server's threads are pinned to (round-robin); empty: not pinned.
    pub cpus: Vec<usize>,
    next_id: AtomicU64,
    next_cpu: AtomicU64,
    aborted: std::sync::atomic::AtomicBool,
}

impl Ctx {
    /// A context; connection numbers start at 1.
    pub fn new(
        site: Site,
        deadline: Option<Instant>,
        threads: usize,
        idle_timeout: Duration,
        cpus: Vec<usize>,
    ) -> Ctx {
        Ctx {
            site,
            deadline,
            threads: threads.max(1),
            idle_timeout,
            cpus,
            next_id: AtomicU64::new(1),
            next_cpu: AtomicU64::new(0),
            aborted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether the server should stop (Ctrl-C, SIGTERM, the deadline, or one of its
    /// threads failed).
    pub fn stopping(&self) -> bool {
        crate::interrupt::requested()
            || self.aborted.load(Ordering::Relaxed)
            || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// A thread of the model failed: every other stops too (a server that carries on
    /// with part of its threads gone would leave connections unanswered).
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::Relaxed);
    }

    /// The next connection number.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Pin the calling thread to the next of `--cpus` (nothing when none were given).
    ///
    /// # Errors
    /// The kernel refuses the CPU.
    pub fn pin_thread(&self) -> io::Result<()> {
        if self.cpus.is_empty() {
            return Ok(());
        }
        let i = self.next_cpu.fetch_add(1, Ordering::Relaxed) as usize;
        let cpu = self.cpus[i % self.cpus.len()];
        let mut set = nix::sched::CpuSet::new();
        set.set(cpu).map_err(io::Error::from)?;
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .map_err(|e| io::Error::other(format!("cannot pin a thread to CPU {cpu}: {e}")))
    }

    /// A new connection: count it and log it (-v 2).
    pub fn accepted(&self, id: u64, peer: &SockAddr, c: &mut Counters) {
        c.connections += 1;
        if self.site.verbose >= 2 {
            crate::http::log(format_args!("conn {id}: accepted from {}", peer_name(peer)));
        }
    }

    /// A connection ends: count who ended it and log it (-v 2; an error at -v 1).
    pub fn closed(&self, s: &Session, end: End, c: &mut Counters) {
        match end {
            End::Finished if s.closed_by_server() => c.closed_by_server += 1,
            End::Finished => c.closed_by_client += 1,
            End::Idle => c.timed_out += 1,
            End::Error(_) => c.errors += 1,
            End::Stopped => c.closed_at_stop += 1,
        }
        let level = if matches!(end, End::Error(_)) { 1 } else { 2 };
        if self.site.verbose >= level {
            let how = match end {
                End::Finished if s.closed_by_server() => "closed by the server".to_string(),
                End::Finished => "closed by the client".to_string(),
                End::Idle => format!(
                    "closed after {} without a byte (--idle-timeout)",
                    crate::vocab::units::format_seconds(self.idle_timeout.as_secs_f64())
                ),
                End::Error(e) => format!("closed on an error: {e}"),
                End::Stopped => "closed: the server is stopping".to_string(),
            };
            crate::http::log(format_args!(
                "conn {}: {how} after {} requests",
                s.id, s.answered
            ));
        }
    }

    /// A connection the model could not take (an accept error or a limit): count and log.
    pub fn refused(&self, why: impl std::fmt::Display, c: &mut Counters) {
        c.refused += 1;
        if self.site.verbose >= 1 {
            crate::http::log(format_args!("refused a connection: {why}"));
        }
    }
}

/// A peer's address as the log shows it.
pub fn peer_name(a: &SockAddr) -> String {
    match a.as_socket() {
        Some(s) => s.to_string(),
        None => "a Unix socket".to_string(),
    }
}

/// How a connection ended.
#[derive(Debug)]
pub enum End {
    /// Its session finished (the client or the server closed it).
    Finished,
    /// It sent nothing within the idle timeout.
    Idle,
    /// An I/O error (a reset counts as the client closing).
    Error(io::Error),
    /// The server stopped.
    Stopped,
}

/// Bytes one [`pump`] call reads at most before it lets the other connections of its
/// thread have their turn (a client streaming a large body cannot starve them).
pub const PUMP_BUDGET: usize = 256 << 10;

/// What [`pump`] did with a nonblocking connection.
#[derive(Debug)]
pub enum Pumped {
    /// Still open; `active` says whether any byte arrived or left (the connection is not
    /// idle, even when its client only downloads a long answer), `blocked_write` whether
    /// answers wait for room in the socket, `more` whether it stopped at [`PUMP_BUDGET`] with
    /// input perhaps still waiting (an edge-triggered caller must come back to it
    /// without waiting for another event).
    Open {
        /// Any byte arrived or was written.
        active: bool,
        /// Answers wait for the socket to take them.
        blocked_write: bool,
        /// The budget ran out before the socket would block.
        more: bool,
    },
    /// Close it now.
    Done(End),
}

/// Whether an error is a peer hanging up rather than a failure.
pub fn is_hangup(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

/// Write what the session has for a nonblocking socket; `Ok(true)` when some is left
/// because the socket is full.
///
/// # Errors
/// A write error other than EAGAIN and EINTR.
pub fn flush(sock: &Socket, s: &mut Session, site: &Site, c: &mut Counters) -> io::Result<bool> {
    while !s.output().is_empty() {
        match (&*sock).write(s.output()) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => s.sent(n, site, c),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// Read everything a nonblocking socket has, answer it, and write the answers, until
/// the socket would block either way (so it suits edge-triggered waits) or the session
/// ends.
pub fn pump(sock: &Socket, s: &mut Session, site: &Site, c: &mut Counters) -> Pumped {
    let mut read = false;
    let mut taken = 0usize;
    let sent_before = c.bytes_sent;
    loop {
        let blocked_write = match flush(sock, s, site, c) {
            Ok(b) => b,
            Err(e) if is_hangup(&e) => return Pumped::Done(End::Finished),
            Err(e) => return Pumped::Done(End::Error(e)),
        };
        if s.finished() {
            return Pumped::Done(End::Finished);
        }
        if !s.wants_read() {
            // Waiting for the client to read its answers.
            return Pumped::Open {
                active: read || c.bytes_sent != sent_before,
                blocked_write,
                more: false,
            };
        }
        if taken >= PUMP_BUDGET {
            return Pumped::Open {
                active: read || c.bytes_sent != sent_before,
                blocked_write,
                more: true,
            };
        }
        match (&*sock).read(s.read_buf()) {
            Ok(0) => {
                s.peer_closed();
                read = true;
            }
            Ok(n) => {
                read = true;
                taken += n;
                s.received(n, site, c);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Pumped::Open {
                    active: read || c.bytes_sent != sent_before,
                    blocked_write,
                    more: false,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_hangup(&e) => {
                s.peer_closed();
                return Pumped::Done(End::Finished);
            }
            Err(e) => return Pumped::Done(End::Error(e)),
        }
    }
}

/// Accept one connection from a nonblocking listener: `Ok(None)` when none is waiting.
/// The connection is nonblocking, with TCP_NODELAY on TCP (answers are small and whole).
///
/// # Errors
/// An accept error other than EAGAIN and EINTR and a connection aborted before accept
/// (EMFILE, ENFILE, ENOBUFS: the caller counts a refusal and goes on).
pub fn accept_nonblocking(l: &Socket) -> io::Result<Option<(Socket, SockAddr)>> {
    loop {
        match l.accept() {
            Ok((s, a)) => {
                s.set_nonblocking(true)?;
                if a.as_socket().is_some() {
                    let _ = s.set_nodelay(true);
                }
                return Ok(Some((s, a)));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            // accept(2): "Linux accept() passes already-pending network errors on the
            // new socket as an error code from accept()... the application should ...
            // treat them like EAGAIN by retrying" (an edge-triggered listener would
            // otherwise leave the rest of its queue waiting for the next connection).
            Err(e) if e.kind() == io::ErrorKind::Interrupted || is_network_error(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Whether an accept error is one of the network errors accept(2) says to retry after.
pub(crate) fn is_network_error(e: &io::Error) -> bool {
    use nix::errno::Errno;
    e.raw_os_error().is_some_and(|n| {
        [
            Errno::ECONNABORTED,
            Errno::ENETDOWN,
            Errno::EPROTO,
            Errno::ENOPROTOOPT,
            Errno::EHOSTDOWN,
            Errno::ENONET,
            Errno::EHOSTUNREACH,
            Errno::EOPNOTSUPP,
            Errno::ENETUNREACH,
        ]
        .contains(&Errno::from_raw(n))
    })
}

/// Whether an accept error is running out of descriptors or memory (the listener stays
/// readable: the model pauses accepting for a tick instead of spinning).
pub fn is_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc_errno::EMFILE | libc_errno::ENFILE | libc_errno::ENOBUFS | libc_errno::ENOMEM)
    )
}

/// The errno values [`is_exhaustion`] looks for.
mod libc_errno {
    pub const EMFILE: i32 = nix::errno::Errno::EMFILE as i32;
    pub const ENFILE: i32 = nix::errno::Errno::ENFILE as i32;
    pub const ENOBUFS: i32 = nix::errno::Errno::ENOBUFS as i32;
    pub const ENOMEM: i32 = nix::errno::Errno::ENOMEM as i32;
}

/// Run `kind` on `listener` until `ctx` says stop; what every thread counted, summed.
///
/// # Errors
/// The model cannot start (no io_uring, no threads) or its wait fails.
pub fn serve(kind: ModelKind, listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
    match kind {
        ModelKind::Thread => thread::serve(listener, ctx),
        ModelKind::Pool => pool::serve(listener, ctx),
        ModelKind::Select => select::serve(listener, ctx),
        ModelKind::Poll => poll::serve(listener, ctx),
        ModelKind::Epoll => epoll::serve(listener, ctx),
        ModelKind::EpollWorkers => epoll::serve_workers(listener, ctx),
        ModelKind::IoUring => uring::serve(listener, ctx),
        ModelKind::Async => async_rt::serve(listener, ctx),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_is_named_and_parsed_back() {
        for m in ModelKind::ALL {
            assert_eq!(ModelKind::parse(m.name()), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert_eq!(ModelKind::parse("fiber"), Ok(ModelKind::Async));
        let e = ModelKind::parse("fork").unwrap_err();
        assert!(e.contains("epoll-workers") && e.contains("'fork'"), "{e}");
    }

    #[test]
    fn exhaustion_is_told_from_other_accept_errors() {
        assert!(is_exhaustion(&io::Error::from_raw_os_error(24)));
        assert!(is_exhaustion(&io::Error::from_raw_os_error(23)));
        assert!(!is_exhaustion(&io::Error::from_raw_os_error(22)));
        assert!(is_network_error(&io::Error::from_raw_os_error(71))); // EPROTO
        assert!(is_network_error(&io::Error::from_raw_os_error(103))); // ECONNABORTED
        assert!(!is_network_error(&io::Error::from_raw_os_error(24)));
    }

    #[test]
    fn a_pump_stops_at_its_budget_and_says_there_is_more() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (a, b) = (
            Socket::from(std::os::fd::OwnedFd::from(a)),
            Socket::from(std::os::fd::OwnedFd::from(b)),
        );
        a.set_send_buffer_size(4 << 20).unwrap();
        b.set_recv_buffer_size(4 << 20).unwrap();
        b.set_nonblocking(true).unwrap();
        a.set_nonblocking(true).unwrap();
        // A request with a long body, more of it waiting than one pump may take.
        let mut w = &a;
        let head = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000000\r\n\r\n";
        w.write_all(head).unwrap();
        let chunk = vec![b'x'; 64 << 10];
        let mut queued = 0;
        while queued < 2 * PUMP_BUDGET {
            match w.write(&chunk) {
                Ok(n) => queued += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(queued > PUMP_BUDGET, "the socket took only {queued} bytes");
        let site = Site::new(13, 0);
        let mut s = Session::new(1);
        let mut c = Counters::default();
        match pump(&b, &mut s, &site, &mut c) {
            Pumped::Open {
                active,
                more,
                blocked_write,
            } => {
                assert!(active && more && !blocked_write);
            }
            other => panic!("{other:?}"),
        }
        let got = c.bytes_received as usize;
        assert!(
            (PUMP_BUDGET..PUMP_BUDGET + crate::http::session::READ_CHUNK).contains(&got),
            "{got}"
        );
        // The next pumps take the rest, and then there is no more.
        let mut rounds = 0;
        while let Pumped::Open { more: true, .. } = pump(&b, &mut s, &site, &mut c) {
            rounds += 1;
            assert!(rounds < 100);
        }
        assert_eq!(c.bytes_received as usize, head.len() + queued);
    }

    /// A listener on a free loopback port.
    fn listener(reuse_port: bool) -> Listener {
        let s = Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.set_reuse_port(reuse_port).unwrap();
        s.bind(&SockAddr::from(std::net::SocketAddr::from((
            [127, 0, 0, 1],
            0,
        ))))
        .unwrap();
        s.listen(16).unwrap();
        let addr = s.local_addr().unwrap();
        Listener {
            socket: s,
            addr,
            backlog: 16,
        }
    }

    #[test]
    fn a_thread_that_cannot_start_stops_the_whole_server_at_once() {
        // The second thread's CPU does not exist: its pin fails.
        for kind in [ModelKind::EpollWorkers, ModelKind::Pool] {
            let ctx = Ctx::new(
                Site::new(13, 0),
                Some(Instant::now() + Duration::from_secs(10)),
                2,
                Duration::from_secs(60),
                vec![0, 100_000],
            );
            let t = Instant::now();
            let r = serve(kind, listener(kind == ModelKind::EpollWorkers), &ctx);
            assert!(r.is_err(), "{kind}");
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "{kind}: {:?}",
                t.elapsed()
            );
        }
    }

    /// The socket behind a descriptor (a duplicate shares it, a new socket does not).
    fn inode(s: &Socket) -> u64 {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/self/fd/{}", s.as_raw_fd()))
            .unwrap()
            .ino()
    }

    #[test]
    fn a_tcp_sibling_is_a_new_socket_on_the_same_port_and_a_unix_one_a_duplicate() {
        let l = listener(true);
        assert!(l.is_tcp());
        let sib = l.sibling().unwrap();
        assert_eq!(sib.local_addr().unwrap().as_socket(), l.addr.as_socket());
        assert_ne!(
            inode(&sib),
            inode(&l.socket),
            "SO_REUSEPORT needs its own socket"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let u = Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
        let addr = SockAddr::unix(&path).unwrap();
        u.bind(&addr).unwrap();
        u.listen(4).unwrap();
        let l = Listener {
            socket: u,
            addr,
            backlog: 4,
        };
        assert!(!l.is_tcp());
        let sib = l.sibling().unwrap();
        assert_eq!(inode(&sib), inode(&l.socket), "a Unix listener is shared");
    }

    #[test]
    fn only_pool_epoll_workers_and_async_take_threads() {
        let taking: Vec<ModelKind> = ModelKind::ALL
            .into_iter()
            .filter(|m| m.takes_threads())
            .collect();
        assert_eq!(
            taking,
            [ModelKind::Pool, ModelKind::EpollWorkers, ModelKind::Async]
        );
    }

    /// A nonblocking socketpair as two sockets (the server's end first).
    fn pair() -> (Socket, Socket) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (a, b) = (
            Socket::from(std::os::fd::OwnedFd::from(a)),
            Socket::from(std::os::fd::OwnedFd::from(b)),
        );
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    #[test]
    fn a_pump_answers_writes_until_the_socket_is_full_and_goes_on_when_it_drains() {
        let (server, client) = pair();
        // An answer far larger than the socket holds.
        let site = Site::new(8 << 20, 0);
        let mut s = Session::new(1);
        let mut c = Counters::default();
        // Nothing arrived: open, idle, nothing to write.
        match pump(&server, &mut s, &site, &mut c) {
            Pumped::Open {
                active,
                blocked_write,
                more,
            } => assert!(!active && !blocked_write && !more),
            other => panic!("{other:?}"),
        }
        // Half a request: nothing to answer yet, but the client is not idle.
        (&client).write_all(b"GET / HTTP/1.1\r\n").unwrap();
        match pump(&server, &mut s, &site, &mut c) {
            Pumped::Open {
                active,
                blocked_write,
                ..
            } => assert!(active && !blocked_write && c.bytes_sent == 0),
            other => panic!("{other:?}"),
        }
        (&client).write_all(b"Host: a\r\n\r\n").unwrap();
        match pump(&server, &mut s, &site, &mut c) {
            Pumped::Open {
                active,
                blocked_write,
                ..
            } => assert!(active && blocked_write),
            other => panic!("{other:?}"),
        }
        let first = c.bytes_sent;
        assert!(first > 0 && !s.output().is_empty());
        // The client reads some: the next pump writes more, though nothing arrived.
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0;
        while let Ok(n) = (&client).read(&mut buf) {
            got += n;
        }
        match pump(&server, &mut s, &site, &mut c) {
            Pumped::Open { active, .. } => assert!(active, "writing is activity"),
            other => panic!("{other:?}"),
        }
        assert!(c.bytes_sent > first);
        // Read it all: exactly what the server says it sent.
        loop {
            match (&client).read(&mut buf) {
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if s.output().is_empty() {
                        break;
                    }
                    let _ = pump(&server, &mut s, &site, &mut c);
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got as u64, c.bytes_sent);
        assert_eq!(c.responses_2xx, 1);
    }

    #[test]
    fn a_client_that_hangs_up_ends_the_pump_as_finished() {
        // An orderly close.
        let (server, client) = pair();
        let site = Site::new(13, 0);
        let mut s = Session::new(1);
        let mut c = Counters::default();
        drop(client);
        assert!(matches!(
            pump(&server, &mut s, &site, &mut c),
            Pumped::Done(End::Finished)
        ));
        assert!(s.finished() && !s.closed_by_server());
        // A reset: a TCP client that closes with SO_LINGER 0.
        let l = listener(false);
        let client = Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        client.connect(&l.addr).unwrap();
        let (server, _) = l.socket.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        client.set_linger(Some(Duration::ZERO)).unwrap();
        drop(client);
        std::thread::sleep(Duration::from_millis(20));
        let mut s = Session::new(2);
        assert!(matches!(
            pump(&server, &mut s, &site, &mut c),
            Pumped::Done(End::Finished)
        ));
        // A client gone while its answer is still being written.
        let (server, client) = pair();
        let big = Site::new(8 << 20, 0);
        let mut s = Session::new(3);
        (&client)
            .write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        assert!(matches!(
            pump(&server, &mut s, &big, &mut c),
            Pumped::Open {
                blocked_write: true,
                ..
            }
        ));
        drop(client);
        assert!(matches!(
            pump(&server, &mut s, &big, &mut c),
            Pumped::Done(End::Finished)
        ));
        assert!(is_hangup(&io::Error::from(io::ErrorKind::ConnectionReset)));
        assert!(is_hangup(&io::Error::from(io::ErrorKind::BrokenPipe)));
        assert!(!is_hangup(&io::Error::from(
            io::ErrorKind::PermissionDenied
        )));
    }
}

//! One generator connection: its socket (TCP or Unix, nonblocking), where it is in its
//! life (closed, connecting, open), the requests it has in flight with their times, and
//! its response parser. The socket calls are here; what they mean for the run is in
//! [`super::worker`].

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use socket2::{Domain, SockAddr, Socket, Type};

use super::tally::{Cause, Times};
use crate::http::response::Parser;

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No socket.
    Closed,
    /// connect() sent, not complete.
    Connecting,
    /// Connected.
    Open,
}

/// One connection slot; its socket is replaced on every reconnect.
#[derive(Debug)]
pub struct Conn {
    /// Index over all connections of the run (spreads the --rate schedules).
    pub index: usize,
    /// The socket while there is one.
    pub sock: Option<Socket>,
    /// Incremented for every new socket; events carry it, so an event for a socket
    /// already closed is recognised and dropped.
    pub generation: u32,
    /// Where it is.
    pub phase: Phase,
    /// When the current connect() started.
    pub connect_start: Instant,
    /// When it completed.
    pub connected_at: Instant,
    /// Connected, and no request written on it yet: the next carries the connect.
    pub fresh: bool,
    /// Requests written (or being written), oldest first: answers come in this order.
    pub pending: VecDeque<Times>,
    /// Bytes of the last batch not written yet (the socket's buffer was full).
    pub unflushed: usize,
    /// Requests in the last batch.
    pub batch: usize,
    /// The answers' parser.
    pub parser: Parser,
    /// When the first byte of the answer being read arrived.
    pub first_byte: Option<Instant>,
    /// Requests taken from the run's budget and not written yet.
    pub claimed: u64,
    /// Under --rate: when the next request is due.
    pub next_due: Instant,
    /// The timer this connection waits for, if any.
    pub timer_at: Option<Instant>,
    /// Nothing more to do (the budget is spent).
    pub done: bool,
    /// Waiting in the worker's refill list.
    pub queued: bool,
}

impl Conn {
    /// A closed connection slot.
    pub fn new(index: usize, method: &str, depth: usize, now: Instant) -> Conn {
        Conn {
            index,
            sock: None,
            generation: 0,
            phase: Phase::Closed,
            connect_start: now,
            connected_at: now,
            fresh: false,
            pending: VecDeque::with_capacity(depth),
            unflushed: 0,
            batch: 0,
            parser: Parser::new(method),
            first_byte: None,
            claimed: 0,
            next_due: now,
            timer_at: None,
            done: false,
            queued: false,
        }
    }

    /// Close the socket (if any) and forget the connection's state; requests in flight
    /// are the caller's to count first.
    pub fn close(&mut self) {
        self.sock = None;
        self.phase = Phase::Closed;
        self.pending.clear();
        self.unflushed = 0;
        self.batch = 0;
        self.first_byte = None;
        self.fresh = false;
        self.parser.reset();
    }

    /// connect() start → connected.
    pub fn connect_ns(&self) -> u64 {
        u64::try_from(
            self.connected_at
                .saturating_duration_since(self.connect_start)
                .as_nanos(),
        )
        .unwrap_or(u64::MAX)
    }

    /// How long the oldest request in flight has waited, or the connect has taken.
    pub fn waited(&self, now: Instant) -> Option<Duration> {
        match self.phase {
            Phase::Connecting => Some(now.saturating_duration_since(self.connect_start)),
            Phase::Open => self
                .pending
                .front()
                .map(|t| now.saturating_duration_since(t.sent)),
            Phase::Closed => None,
        }
    }
}

/// Start a nonblocking connect to `addr`: the socket, and whether it is connected
/// already (a Unix socket always is; TCP usually is not yet).
///
/// # Errors
/// The socket cannot be made, or connect() failed at once.
pub fn open(addr: &SockAddr) -> io::Result<(Socket, bool)> {
    let tcp = addr.is_ipv4() || addr.is_ipv6();
    let domain = if tcp {
        Domain::for_address(addr.as_socket().ok_or(io::ErrorKind::InvalidInput)?)
    } else {
        Domain::UNIX
    };
    let sock = Socket::new(domain, Type::STREAM.nonblocking(), None)?;
    if tcp {
        // A refilled pipeline must not wait for the ACK of the previous batch (Nagle).
        sock.set_nodelay(true)?;
    }
    match sock.connect(addr) {
        Ok(()) => Ok((sock, true)),
        Err(e) if e.raw_os_error() == Some(nix::libc::EINPROGRESS) => Ok((sock, false)),
        Err(e) => Err(e),
    }
}

/// Whether a connect in progress succeeded (SO_ERROR), once the socket is writable.
///
/// # Errors
/// The connect's error.
pub fn connected(sock: &Socket) -> io::Result<()> {
    match sock.take_error()? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Write without SIGPIPE.
///
/// # Errors
/// The send's error (`WouldBlock` when the buffer is full).
pub fn send(sock: &Socket, bytes: &[u8]) -> io::Result<usize> {
    crate::testhooks::slow("load-send");
    sock.send_with_flags(bytes, nix::libc::MSG_NOSIGNAL)
}

/// The failure cause of a connect error.
pub fn connect_cause(e: &io::Error) -> Cause {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => Cause::ConnectRefused,
        io::ErrorKind::TimedOut => Cause::ConnectTimeout,
        // A Unix socket file with nothing behind it.
        io::ErrorKind::NotFound => Cause::ConnectRefused,
        _ => Cause::ConnectError,
    }
}

/// The failure cause of a read or write error.
pub fn read_cause(e: &io::Error) -> Cause {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => Cause::ReadReset,
        io::ErrorKind::TimedOut => Cause::ReadTimeout,
        _ => Cause::ReadError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connect_is_refused_and_a_listener_connects() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (sock, done) = open(&SockAddr::from(addr)).unwrap();
        if !done {
            // Wait for writability the simple way.
            let fd = std::os::fd::AsFd::as_fd(&sock);
            let mut p = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLOUT)];
            nix::poll::poll(&mut p, 1000u16).unwrap();
        }
        connected(&sock).unwrap();
        drop(l);
        let e = match open(&SockAddr::from(addr)) {
            Err(e) => e,
            Ok((sock, _)) => {
                let fd = std::os::fd::AsFd::as_fd(&sock);
                let mut p = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLOUT)];
                nix::poll::poll(&mut p, 1000u16).unwrap();
                connected(&sock).unwrap_err()
            }
        };
        assert_eq!(connect_cause(&e), Cause::ConnectRefused);
        let e = open(&SockAddr::unix("/nonexistent/sock").unwrap()).unwrap_err();
        assert_eq!(connect_cause(&e), Cause::ConnectRefused);
    }
}

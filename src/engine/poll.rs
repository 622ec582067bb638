//! The `poll` engine (the classic `blocking-async` mode: I/O multiplexing, blocking in
//! the readiness call instead of the transfer): non-blocking descriptors, `poll(2)` on
//! `EAGAIN`.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::readiness::{self, Waiter};
use super::Engine;
use crate::transport::{Conn, TransportKind};

/// Wait with `poll(2)`.
pub struct Poll;

struct PollWaiter;

impl Waiter for PollWaiter {
    fn wait(&mut self, fd: RawFd, readable: bool, timeout: Option<Duration>) -> io::Result<bool> {
        crate::sys::wait::poll_one(fd, readable, timeout)
    }
}

impl Engine for Poll {
    fn refuses(&self, transport: TransportKind) -> Option<String> {
        readiness::refuses(transport)
    }

    fn attach(&self, conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>> {
        readiness::attach(conn, PollWaiter)
    }
}

//! The `nonblocking` engine (the classic `nonblocking-sync` mode): non-blocking
//! descriptors, and on `EAGAIN` simply try again, burning CPU instead of sleeping.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::readiness::{self, Waiter};
use super::Engine;
use crate::transport::{Conn, TransportKind};

/// Retry on `EAGAIN` without sleeping.
pub struct Nonblocking;

struct Spin;

impl Waiter for Spin {
    fn wait(
        &mut self,
        _fd: RawFd,
        _readable: bool,
        _timeout: Option<Duration>,
    ) -> io::Result<bool> {
        // Return at once: the caller retries the call, which is the point of this mode
        // (a receive timeout is enforced by the caller's deadline).
        std::hint::spin_loop();
        Ok(true)
    }
}

impl Engine for Nonblocking {
    fn refuses(&self, transport: TransportKind) -> Option<String> {
        readiness::refuses(transport)
    }

    fn attach(&self, conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>> {
        readiness::attach(conn, Spin)
    }
}

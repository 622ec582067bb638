//! The `epoll` engine: non-blocking descriptors, each registered once (level-triggered)
//! with an epoll instance per direction; `epoll_wait(2)` on `EAGAIN`.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::readiness::{self, Waiter};
use super::Engine;
use crate::sys::wait::EpollSet;
use crate::transport::{Conn, TransportKind};

/// Wait with `epoll_wait(2)`.
pub struct Epoll;

/// One epoll set per (descriptor, direction), made on first use and kept.
#[derive(Default)]
struct EpollWaiter {
    sets: Vec<(RawFd, bool, EpollSet)>,
}

impl Waiter for EpollWaiter {
    fn wait(&mut self, fd: RawFd, readable: bool, timeout: Option<Duration>) -> io::Result<bool> {
        let i = match self
            .sets
            .iter()
            .position(|(f, r, _)| *f == fd && *r == readable)
        {
            Some(i) => i,
            None => {
                self.sets.push((fd, readable, EpollSet::new(fd, readable)?));
                self.sets.len() - 1
            }
        };
        self.sets[i].2.wait(timeout)
    }
}

impl Engine for Epoll {
    fn refuses(&self, transport: TransportKind) -> Option<String> {
        readiness::refuses(transport)
    }

    fn attach(&self, conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>> {
        readiness::attach(conn, EpollWaiter::default())
    }
}

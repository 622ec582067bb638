//! `select`: one thread, select(2), level-triggered: the loop of the `poll` model
//! (`poll.rs`) with two `fd_set`s built each round instead of a `pollfd` array.
//!
//! An `fd_set` holds descriptors below `FD_SETSIZE` (1024) only, whatever
//! RLIMIT_NOFILE allows: a connection accepted on a higher descriptor is closed at once
//! and counted as refused, with a hint to use a model without the limit.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use nix::sys::select::{select, FdSet, FD_SETSIZE};
use nix::sys::time::{TimeVal, TimeValLike};

use super::poll::{run, Conn, Waiter};
use super::{Ctx, Listener};
use crate::http::Counters;

/// Serve with the `select` model until [`Ctx::stopping`].
///
/// # Errors
/// The listener's descriptor is too high for select(2), the thread cannot be pinned, or
/// select(2) fails.
pub fn serve(listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
    let fd = listener.socket.as_raw_fd();
    if let Some(why) = Select.cannot_watch(fd) {
        anyhow::bail!("the listener: {why}");
    }
    ctx.pin_thread()?;
    run(&listener.socket, ctx, &mut Select)
}

/// Whether select(2) can watch `fd`.
fn fits(fd: RawFd) -> bool {
    usize::try_from(fd).is_ok_and(|fd| fd < FD_SETSIZE)
}

/// select(2) over a read set and a write set.
struct Select;

impl Waiter for Select {
    const NAME: &'static str = "select(2)";

    fn cannot_watch(&self, fd: RawFd) -> Option<String> {
        (!fits(fd)).then(|| {
            format!(
                "select(2) cannot watch descriptor {fd} (FD_SETSIZE {FD_SETSIZE}): use the poll or epoll model"
            )
        })
    }

    fn wait(
        &mut self,
        listener: Option<BorrowedFd<'_>>,
        conns: &[Conn],
        timeout: Duration,
        ready: &mut Vec<bool>,
    ) -> io::Result<bool> {
        let mut reads = FdSet::new();
        let mut writes = FdSet::new();
        let mut highest = -1;
        if let Some(l) = listener {
            reads.insert(l);
            highest = l.as_raw_fd();
        }
        for c in conns {
            let fd = c.fd();
            if c.wants_read() {
                reads.insert(fd);
            }
            if c.wants_write() {
                writes.insert(fd);
            }
            highest = highest.max(fd.as_raw_fd());
        }
        let micros = i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX);
        let mut timeout = TimeVal::microseconds(micros);
        select(
            highest + 1,
            &mut reads,
            &mut writes,
            None::<&mut FdSet<'_>>,
            &mut timeout,
        )?;
        ready.clear();
        ready.extend(conns.iter().map(|c| {
            let fd = c.fd();
            reads.contains(fd) || writes.contains(fd)
        }));
        Ok(listener.is_some_and(|l| reads.contains(l.as_fd())))
    }
}

#[cfg(test)]
mod tests {
    use super::super::poll::tests::serves_every_kind_of_client;
    use super::*;

    #[test]
    fn descriptors_from_fd_setsize_on_are_refused_with_a_hint() {
        assert!(Select.cannot_watch(0).is_none());
        assert!(Select.cannot_watch(1023).is_none());
        let why = Select.cannot_watch(1024).unwrap();
        assert!(
            why.contains("descriptor 1024") && why.contains("poll or epoll"),
            "{why}"
        );
        assert!(Select.cannot_watch(-1).is_some());
    }

    #[test]
    fn select_serves_every_kind_of_client() {
        serves_every_kind_of_client(super::serve, 2);
    }
}

//! The shared-memory ring (see `sys::shm`): a byte stream with no kernel in the data path.
//! `--sndbuf` sets the ring size (default [`DEFAULT_RING_BYTES`]).

use std::io;
use std::os::fd::RawFd;

use anyhow::Context;

use super::{Conn, LinkInfo, Pair, TransportOptions};
use crate::sys::shm::{ring, Consumer, Producer};

/// Default ring size: large enough to pipeline 1 MiB messages, small enough for the cache.
pub const DEFAULT_RING_BYTES: usize = 1 << 20;

struct ShmSender(Producer);
struct ShmReceiver(Consumer);

impl Conn for ShmSender {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn recv(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
    fn finish(&mut self) -> io::Result<()> {
        self.0.close();
        Ok(())
    }
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}

impl Conn for ShmReceiver {
    fn send(&mut self, _buf: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.0.read(buf))
    }
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}

/// Create a ring pair in a fresh shared-memory object.
pub fn pair(opts: &TransportOptions, id: usize) -> anyhow::Result<Pair> {
    let name = format!("/sockbench-{}-{id}", std::process::id());
    let (p, c) = ring(&name, opts.sndbuf.unwrap_or(DEFAULT_RING_BYTES)).with_context(|| {
        format!("cannot create shared-memory ring {name} (is /dev/shm mounted and writable?)")
    })?;
    let cap = p.capacity() as u64;
    Ok(Pair {
        sender: Box::new(ShmSender(p)),
        receiver: Box::new(ShmReceiver(c)),
        info: LinkInfo {
            sndbuf_bytes: Some(cap),
            rcvbuf_bytes: Some(cap),
            mss_bytes: None,
            endpoint: Some(name),
        },
    })
}

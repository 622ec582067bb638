//! The shared-memory ring (see `sys::shm`): a byte stream with no kernel in the data path.
//! `--sndbuf` sets the ring size (default [`DEFAULT_RING_BYTES`]).

use std::io;
use std::os::fd::RawFd;

use anyhow::Context;

use super::{Conn, Connected, Endpoint, LinkInfo, Listener, TransportOptions};
use crate::sys::shm::{create, open, Consumer, Producer};
use crate::vocab::units::format_bytes;

/// Default ring size: large enough to pipeline 1 MiB messages, small enough for the cache.
pub const DEFAULT_RING_BYTES: usize = 1 << 20;

struct ShmSender(Producer);
struct ShmReceiver(Consumer);

impl Conn for ShmSender {
    fn waker(&self) -> Option<super::Waker> {
        let flag = self.0.abandon_flag();
        Some(Box::new(move || {
            flag.store(true, std::sync::atomic::Ordering::Release)
        }))
    }
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
    fn waker(&self) -> Option<super::Waker> {
        let flag = self.0.abandon_flag();
        Some(Box::new(move || {
            flag.store(true, std::sync::atomic::Ordering::Release)
        }))
    }
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

/// A created ring, waiting for its producer; the name goes when the listener does.
struct ShmListener {
    consumer: Option<Consumer>,
    name: String,
    endpoint: Endpoint,
}

impl Drop for ShmListener {
    fn drop(&mut self) {
        crate::sys::shm::unlink(&self.name);
    }
}

/// The receiving half: create the ring (`--sndbuf` bytes) in a fresh shared-memory object.
pub fn listen(opts: &TransportOptions, id: usize) -> anyhow::Result<Box<dyn Listener>> {
    let name = format!("/sockbench-{}-{id}", std::process::id());
    let want = opts.sndbuf.unwrap_or(DEFAULT_RING_BYTES);
    let consumer = create(&name, want, || crate::testhooks::hold("shm")).map_err(|e| {
        let hint = if e.raw_os_error() == Some(nix::libc::ENOSPC) {
            let free = nix::sys::statvfs::statvfs("/dev/shm")
                .map(|v| format_bytes(v.blocks_available() * v.fragment_size()))
                .unwrap_or_else(|_| "unknown".into());
            format!(
                "/dev/shm has {free} free, too little for a ring of {}: free space there, remount it larger \
                 (`mount -o remount,size=1G /dev/shm`), or use a smaller --sndbuf",
                format_bytes(want.max(4096).next_power_of_two() as u64)
            )
        } else {
            "is /dev/shm mounted and writable?".into()
        };
        anyhow::Error::new(e).context(format!("cannot create shared-memory ring {name}: {hint}"))
    })?;
    Ok(Box::new(ShmListener {
        consumer: Some(consumer),
        endpoint: Endpoint::Name(name.clone()),
        name,
    }))
}

impl Listener for ShmListener {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn accept(
        mut self: Box<Self>,
        _peer: Option<&Endpoint>,
    ) -> anyhow::Result<(Box<dyn Conn>, LinkInfo)> {
        let consumer = self
            .consumer
            .take()
            .context("the ring was accepted already")?;
        let cap = consumer.capacity() as u64;
        let info = LinkInfo {
            sndbuf_bytes: Some(cap),
            rcvbuf_bytes: Some(cap),
            ..LinkInfo::default()
        };
        Ok((Box::new(ShmReceiver(consumer)), info))
    }
}

/// The sending half: open the ring named `name`. With `owner` (a ring a peer named), the
/// object must belong to that uid, checked before it is mapped.
pub fn connect(name: &str, owner: Option<u32>) -> anyhow::Result<Connected> {
    let producer =
        open(name, owner).with_context(|| format!("cannot open shared-memory ring {name}"))?;
    Ok(Connected {
        conn: Box::new(ShmSender(producer)),
        local: None,
    })
}

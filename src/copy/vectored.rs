//! `vectored`: readv(2) into `--iovecs` buffers that make up `--buffer`, writev(2) the
//! filled ones out, looping over partial writes. The same bytes move as with read-write;
//! what differs is the kernel walking an iovec array on each call (what a proxy that
//! reads into a chain of buffers pays).

use std::io;
use std::os::fd::AsFd;

use super::{is_timeout, retry_unless_interrupted, Copied, Copier, End, Options};
use crate::sys::vectored::VectoredBuf;

/// One `--buffer` of `--iovecs` parts, with their iovecs built once.
#[derive(Debug)]
pub struct Vectored {
    buf: VectoredBuf,
}

impl Vectored {
    /// A copier whose `opts.buffer` bytes are cut into `opts.iovecs` parts.
    ///
    /// # Errors
    /// `InvalidInput` for 0 or more than 1024 iovecs (readv's limit); if the buffer
    /// cannot be allocated.
    pub fn new(opts: &Options) -> io::Result<Vectored> {
        Ok(Vectored {
            buf: VectoredBuf::new(opts.buffer.max(1), opts.iovecs)?,
        })
    }

    /// writev everything staged to `to`, counting each call.
    fn write_staged(&mut self, to: &End, counts: &mut Copied) -> io::Result<()> {
        while !self.buf.all_written() {
            counts.syscalls += 1;
            counts.ops += 1;
            match self.buf.write_to(to.as_fd()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => counts.bytes += n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => retry_unless_interrupted()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Copier for Vectored {
    fn copy(&mut self, from: &End, to: &End, counts: &mut Copied) -> io::Result<()> {
        loop {
            counts.syscalls += 1;
            counts.ops += 1;
            match self.buf.read_from(from.as_fd()) {
                Ok(0) => break,
                Ok(n) => {
                    self.buf.stage(n);
                    self.write_staged(to, counts)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => retry_unless_interrupted()?,
                Err(e) => return Err(e),
            }
        }
        to.shutdown_write()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::testkit::{self, Feed, KINDS};
    use super::*;

    #[test]
    fn seven_bytes_in_three_iovecs_relay_every_byte_in_order() {
        let opts = Options {
            buffer: 7,
            iovecs: 3,
            ..Options::default()
        };
        let mut c = Vectored::new(&opts).unwrap();
        for kind in KINDS {
            for n in [100_000, 6, 7, 8] {
                let feed = Feed::During(Duration::ZERO);
                let r = testkit::relay(&mut c, kind, n, feed, Duration::from_secs(2));
                assert!(r.result.is_ok(), "{kind:?}: {:?}", r.result);
                assert_eq!((r.received, r.copied.bytes), (n, n as u64), "{kind:?}");
                assert!(
                    r.copied.ops > 2 * n.div_ceil(7) as u64,
                    "{kind:?}: {:?}",
                    r.copied
                );
            }
        }
    }

    #[test]
    fn no_iovecs_or_more_than_readv_takes_are_refused() {
        for iovecs in [0, 1025] {
            let opts = Options {
                iovecs,
                ..Options::default()
            };
            let e = Vectored::new(&opts).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{iovecs}");
        }
        let opts = Options {
            iovecs: 1024,
            ..Options::default()
        };
        assert!(Vectored::new(&opts).is_ok());
    }
}

//! `read-write`: read(2) into one buffer, write(2) all of it out, again: the copy every
//! proxy starts with (Go's io.CopyBuffer over raw connections).

use std::io::{self, Read, Write};

use super::{is_timeout, retry_unless_interrupted, Copied, Copier, End, Options};

/// One buffer of `--buffer` bytes.
pub struct ReadWrite {
    buf: crate::sys::Buffer,
}

impl ReadWrite {
    /// A copier with a `opts.buffer`-byte buffer.
    ///
    /// # Errors
    /// If the buffer cannot be allocated.
    pub fn new(opts: &Options) -> io::Result<ReadWrite> {
        Ok(ReadWrite {
            buf: crate::sys::buffer(opts.buffer.max(1), 0)?,
        })
    }
}

/// Write all of `buf` to `to`, counting each call.
pub(super) fn write_all(mut to: &End, buf: &[u8], counts: &mut Copied) -> io::Result<()> {
    let mut off = 0;
    while off < buf.len() {
        counts.syscalls += 1;
        counts.ops += 1;
        match to.write(&buf[off..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                off += n;
                counts.bytes += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => retry_unless_interrupted()?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Copier for ReadWrite {
    fn copy(&mut self, mut from: &End, to: &End, counts: &mut Copied) -> io::Result<()> {
        loop {
            counts.syscalls += 1;
            counts.ops += 1;
            crate::testhooks::slow("relay-copy");
            match from.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => write_all(to, &self.buf[..n], counts)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => retry_unless_interrupted()?,
                Err(e) => return Err(e),
            }
        }
        to.shutdown_write()
    }
}

//! `buffered`: std's `BufReader` and `BufWriter` of `--buffer` bytes each, and
//! `std::io::copy` between them, as a Rust program that wraps its connections in buffered
//! streams would relay (Go's bufio.Reader/Writer and io.Copy).
//!
//! What std's copy does with them, so the figures can be read: with buffers of 8 KiB or
//! more, it fills the reader's buffer with one read and hands that to the writer, which
//! writes a full buffer straight through and keeps a short read in its own buffer (a
//! memcpy) until it fills or the copy ends. Below 8 KiB std copies through an 8 KiB
//! buffer of its own, which bypasses both (so a smaller `--buffer` reads and writes 8 KiB
//! at a time).
//!
//! So a short read waits in the writer's buffer until more fills it or the source ends:
//! bulk streams pass, but a lone message (a request awaiting its answer) is held back
//! for good, as by any buffered writer nobody flushes. On Ctrl-C, what it holds is
//! dropped (and, never written, not counted).
//!
//! The reader and writer std sees are [`Counted`] wrappers, not the sockets: they count
//! each call, retry timeouts, and hide the sockets from std's Linux specialisation of
//! `io::copy`, which would otherwise splice between two sockets behind our back.

use std::io::{self, BufReader, BufWriter, Read, Write};

use super::{is_timeout, retry_unless_interrupted, Copied, Copier, End, Options};

/// Buffered streams of `--buffer` bytes (allocated per connection, as a program that
/// wraps each connection in them does).
#[derive(Debug)]
pub struct Buffered {
    capacity: usize,
}

impl Buffered {
    /// A copier whose reader and writer buffer `opts.buffer` bytes each.
    ///
    /// # Errors
    /// None today (the buffers are allocated per copy).
    pub fn new(opts: &Options) -> io::Result<Buffered> {
        Ok(Buffered {
            capacity: opts.buffer.max(1),
        })
    }
}

/// One end as std's copy sees it: each read or write is one system call, counted.
struct Counted<'a> {
    end: &'a End,
    counts: Copied,
    /// Ctrl-C came: the `Interrupted` error the copy is to end with (std got a stand-in).
    stop: Option<io::Error>,
}

impl<'a> Counted<'a> {
    fn new(end: &'a End) -> Counted<'a> {
        Counted {
            end,
            counts: Copied::default(),
            stop: None,
        }
    }

    /// After a timeout: try again, or, on Ctrl-C, an error std passes on. Not
    /// `Interrupted` itself: std's copy, BufWriter and write_all retry that (EINTR), so
    /// they would spin here, each turn a socket timeout long.
    fn retry(&mut self) -> io::Result<()> {
        retry_unless_interrupted().map_err(|e| {
            self.stop = Some(e);
            io::Error::other("interrupted while relaying")
        })
    }
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.counts.syscalls += 1;
            self.counts.ops += 1;
            match (&mut &*self.end).read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => self.retry()?,
                r => return r,
            }
        }
    }
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            self.counts.syscalls += 1;
            self.counts.ops += 1;
            match (&mut &*self.end).write(buf) {
                Ok(n) => {
                    self.counts.bytes += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => self.retry()?,
                Err(e) => return Err(e),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Copier for Buffered {
    fn copy(&mut self, from: &End, to: &End, counts: &mut Copied) -> io::Result<()> {
        let mut reader = BufReader::with_capacity(self.capacity, Counted::new(from));
        let mut writer = BufWriter::with_capacity(self.capacity, Counted::new(to));
        let copied = io::copy(&mut reader, &mut writer).and_then(|_| writer.flush());
        // into_parts, not drop: dropping a BufWriter flushes what it holds, ignoring
        // errors, so a failed copy would go on writing (uncounted) after it failed.
        let (mut w, _unwritten) = writer.into_parts();
        let mut r = reader.into_inner();
        *counts = counts.plus(r.counts).plus(w.counts);
        if let Some(e) = r.stop.take().or(w.stop.take()) {
            return Err(e);
        }
        copied?;
        to.shutdown_write()
    }
}

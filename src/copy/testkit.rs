//! What every method's tests share: connected pairs of each socket kind, a byte pattern
//! that shows where each byte came from, and a relay through a copier whose far end is
//! read back and checked byte by byte.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::LazyLock;
use std::thread;
use std::time::{Duration, Instant};

use super::{Copied, Copier, End, Method};

/// The pattern's period: a prime, so a chunk that lands a power of two (a buffer, a
/// page, a pipe) too early or too late does not match.
pub const PERIOD: usize = 65521;

/// The largest payload the tests send.
pub const LARGEST: usize = 4 << 20;

/// The payload sizes every method is run with.
pub const SIZES: [usize; 4] = [0, 1, 10_000, LARGEST];

static PATTERN: LazyLock<Vec<u8>> = LazyLock::new(|| {
    (0..LARGEST)
        .map(|i| {
            // The top byte of a multiplicative hash of the position within the period.
            let x = (i % PERIOD) as u32;
            (x.wrapping_mul(0x9E37_79B1) >> 24) as u8
        })
        .collect()
});

/// The first `n` bytes every test sends.
pub fn pattern(n: usize) -> &'static [u8] {
    &PATTERN[..n]
}

/// The kinds of socket a relay's ends can be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// TCP over 127.0.0.1: listen, connect, accept.
    Tcp,
    /// A Unix stream socket pair.
    Unix,
}

/// Both kinds.
pub const KINDS: [Kind; 2] = [Kind::Tcp, Kind::Unix];

/// Two connected ends.
pub fn pair(kind: Kind) -> (End, End) {
    match kind {
        Kind::Tcp => {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (b, _) = l.accept().unwrap();
            (End::Tcp(a), End::Tcp(b))
        }
        Kind::Unix => {
            let (a, b) = UnixStream::pair().unwrap();
            (End::Unix(a), End::Unix(b))
        }
    }
}

/// The methods this build and kernel can run.
pub fn available() -> Vec<Method> {
    Method::ALL
        .into_iter()
        .filter(|m| m.unavailable().is_none())
        .collect()
}

/// How the source sends its bytes.
#[derive(Clone, Copy, Debug)]
pub enum Feed {
    /// All of them, and its end, before the copy starts (they must fit in the socket's
    /// buffer): every read then finds bytes or the end waiting, so the count of calls
    /// is exact.
    Before,
    /// From a thread, in pieces, after the given pause, while the copy runs.
    During(Duration),
}

/// What one relay did.
#[derive(Debug)]
pub struct Relayed {
    /// The copy's result.
    pub result: io::Result<()>,
    /// What the copier counted.
    pub copied: Copied,
    /// Bytes the sink received (each checked against the pattern).
    pub received: usize,
    /// How long the copy took.
    pub elapsed: Duration,
}

/// Send `n` bytes of the pattern through `copier` from one `kind` pair to another, the
/// copier's ends having `timeout` as their SO_RCVTIMEO and SO_SNDTIMEO. The sink checks
/// every byte it reads (a wrong one panics the test).
pub fn relay(
    copier: &mut dyn Copier,
    kind: Kind,
    n: usize,
    feed: Feed,
    timeout: Duration,
) -> Relayed {
    let (src, from) = pair(kind);
    let (to, sink) = pair(kind);
    from.set_timeouts(Some(timeout)).unwrap();
    to.set_timeouts(Some(timeout)).unwrap();
    let writer = match feed {
        Feed::Before => {
            send(&src, n);
            None
        }
        Feed::During(pause) => Some(thread::spawn(move || {
            thread::sleep(pause);
            // A copy that failed closes its ends: the writer then fails, as it should.
            let _ = std::panic::catch_unwind(|| send(&src, n));
        })),
    };
    let reader = thread::spawn(move || receive(&sink, n));
    let mut copied = Copied::default();
    let start = Instant::now();
    let result = copier.copy(&from, &to, &mut copied);
    let elapsed = start.elapsed();
    // Whatever the copy left, the sink now sees the end, and a writer still writing
    // sees the source gone.
    drop((from, to));
    if let Some(w) = writer {
        w.join().unwrap();
    }
    let received = reader.join().expect("the sink got a wrong byte");
    Relayed {
        result,
        copied,
        received,
        elapsed,
    }
}

/// Write the first `n` bytes of the pattern to `end` in pieces of a size that is no
/// power of two, then end it.
pub fn send(mut end: &End, n: usize) {
    for piece in pattern(n).chunks(100_003) {
        end.write_all(piece).unwrap();
    }
    end.shutdown_write().unwrap();
}

/// Read `end` until it ends (or fails), checking each byte against the pattern; the
/// count read.
pub fn receive(mut end: &End, n: usize) -> usize {
    end.set_timeouts(Some(Duration::from_secs(20))).unwrap();
    let mut buf = vec![0u8; 256 << 10];
    let mut got = 0;
    loop {
        match end.read(&mut buf) {
            Ok(0) => return got,
            Ok(k) => {
                assert!(got + k <= n, "{} bytes arrived of {n} sent", got + k);
                if buf[..k] != pattern(got + k)[got..] {
                    let bad = (0..k).find(|&i| buf[i] != pattern(n)[got + i]).unwrap();
                    panic!("byte {} of {n} is wrong", got + bad);
                }
                got += k;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Reset by a copy that failed: what came, came.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the sink failed after {got} bytes: {e}"),
        }
    }
}

/// The most bytes one read or one write of `method` moves: what its calls' counts are
/// bounded by. `buffer` is `--buffer`; `pipe` what the copier's pipe_size() says.
pub fn chunk(method: Method, buffer: usize, pipe: Option<usize>) -> usize {
    match method {
        Method::Splice | Method::IoUringSplice => pipe.expect("a splice method has a pipe"),
        // Below 8 KiB, std's io::copy reads into and writes from its own 8 KiB buffer.
        Method::Buffered => buffer.max(8 << 10),
        _ => buffer,
    }
}

/// System calls beyond one per operation that `method` may make in `elapsed`: a ring
/// enters again after each wait that timed out (one per `TICK`, 100 ms) or was woken
/// by a signal; the others make exactly one call per operation.
pub fn extra_enters(method: Method, elapsed: Duration) -> u64 {
    match method {
        Method::IoUring | Method::IoUringSplice => elapsed.as_millis() as u64 / 100 + 1,
        _ => 0,
    }
}

/// Check what a relay of `n` bytes, that succeeded, counted: the bytes exactly, at least
/// the operations a whole payload needs in chunks of at most `chunk` (every chunk read
/// and written, and the read that finds the end), and system calls one per operation
/// (plus a ring's timed-out waits).
pub fn check_counts(method: Method, r: &Relayed, n: usize, chunk: usize) {
    let what = format!("{method}, {n} bytes: {:?}", r.copied);
    assert!(r.result.is_ok(), "{what}: {:?}", r.result);
    assert_eq!(r.received, n, "{what}");
    assert_eq!(r.copied.bytes, n as u64, "{what}");
    let chunks = n.div_ceil(chunk) as u64;
    assert!(r.copied.ops > 2 * chunks, "{what}: fewer calls than chunks");
    // A sanity ceiling, not a law: loopback delivers whole segments of kilobytes, so
    // calls that moved 64 bytes on average mean a copier that dribbles or spins. The
    // async method also counts a read or write that found nothing (at most one per
    // successful one).
    let per_op = if method == Method::Async { 32 } else { 64 };
    assert!(
        r.copied.ops <= 2 * (n / per_op) as u64 + 5,
        "{what}: too many calls"
    );
    assert!(r.copied.syscalls >= r.copied.ops, "{what}");
    assert!(
        r.copied.syscalls <= r.copied.ops + extra_enters(method, r.elapsed),
        "{what}: in {:?}",
        r.elapsed
    );
}

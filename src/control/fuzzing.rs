//! What the whole-session fuzz targets share (`placement::remote::session_fuzz` plays a
//! hostile server against the real client, `mode::server::session_fuzz` a hostile client
//! against the real server): a loopback control connection whose stream reports what the
//! conversation holds, frames broken on purpose, lies put into JSON bodies, and places a
//! peer may name that no trust check lets through (and that tell whether anyone opened
//! them anyway).
//!
//! Test code only. It owns no protocol logic: each target writes its own script of what
//! an honest peer sends, and breaks one step of it with a [`Break`].

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use serde_json::Value;

use super::frame::{Decoder, FrameType, HEADER};
use super::messages::Welcome;
use super::{Deadlines, Stream};
use crate::transport::Endpoint;

/// The deadline of every step of a fuzzed session: short, so that a silent peer costs
/// little; longer in a debug build, which the whole test suite shares two CPUs with.
pub(crate) fn step() -> Duration {
    if cfg!(debug_assertions) {
        Duration::from_millis(60)
    } else {
        Duration::from_millis(10)
    }
}

/// Every deadline of a fuzzed session: a few steps for the handshake and between runs,
/// a step for everything else; a run's coordinator looks at its roles every 200 µs.
pub(crate) fn deadlines() -> Deadlines {
    Deadlines {
        hello: step() * 3,
        handshake: step() * 3,
        step: step(),
        idle: step() * 3,
        stall: step(),
        tick: Duration::from_micros(200),
    }
}

/// Run `PROPTEST_CASES` (default 300) sessions drawn from `strategy()` through `test`, on
/// `SBFUZZ_WORKERS` threads at once (default: one in the test suite, four per CPU from
/// 10,000 cases: a session mostly waits for the other side's thread, so several overlap),
/// each with its own `fixture` (decoys, a server) so that what one session did is never
/// blamed on another's. The first failure stops every worker and is reported with its
/// case, shrunk.
///
/// # Panics
/// On a failing case (it is a test).
pub(crate) fn run_sessions<S: Strategy, F>(
    strategy: impl Fn() -> S + Sync,
    fixture: impl Fn() -> F + Sync,
    test: impl Fn(&F, S::Value) -> Result<(), TestCaseError> + Sync,
) {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok());
    let cases = env("PROPTEST_CASES").unwrap_or(300);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let workers = env("SBFUZZ_WORKERS")
        .unwrap_or(if cases >= 10_000 { 4 * cpus } else { 1 })
        .clamp(1, cases.max(1));
    let failed = AtomicBool::new(false);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for w in 0..workers {
            let (strategy, fixture, test, failed, failure) =
                (&strategy, &fixture, &test, &failed, &failure);
            scope.spawn(move || {
                let mine = cases / workers + u32::from(w < cases % workers);
                let f = fixture();
                let mut runner = TestRunner::new(Config {
                    cases: mine,
                    failure_persistence: None,
                    ..Config::default()
                });
                let result = runner.run(&strategy(), |case| {
                    if failed.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    test(&f, case)
                });
                if let Err(e) = result {
                    failed.store(true, Ordering::Relaxed);
                    let why = match e {
                        TestError::Fail(why, case) => format!("{why}\n{case:#?}"),
                        e => e.to_string(),
                    };
                    failure
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(why);
                }
            });
        }
    });
    if let Some(why) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        panic!("{why}");
    }
}

/// A control connection within this process over loopback: (the dialling end, the
/// accepting end). Both ends close with a reset ([`hang_up`]), so a million of them leave
/// no TIME-WAIT behind to run the ports out.
pub(crate) fn loopback() -> (TcpStream, TcpStream) {
    static LISTENER: Mutex<Option<TcpListener>> = Mutex::new(None);
    let mut l = LISTENER.lock().unwrap_or_else(|e| e.into_inner());
    let l = l.get_or_insert_with(|| TcpListener::bind("127.0.0.1:0").expect("a loopback port"));
    let dialled = TcpStream::connect(l.local_addr().expect("bound")).expect("loopback connect");
    let (accepted, _) = l.accept().expect("loopback accept");
    for s in [&dialled, &accepted] {
        let _ = s.set_nodelay(true);
    }
    (dialled, accepted)
}

/// Close `s` (and every clone of it) with a reset: no TIME-WAIT on either end.
pub(crate) fn hang_up(s: &TcpStream) {
    let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
    let _ = s.shutdown(std::net::Shutdown::Both);
}

/// What one conversation held of its peer's frames, read by read.
#[derive(Default)]
pub(crate) struct Watch {
    /// Whether the handshake was over at the time of each note, the bytes held and the
    /// largest body the decoder would then take.
    notes: Mutex<Vec<(bool, usize, usize)>>,
    established: AtomicBool,
}

impl Watch {
    /// From now on, the conversation is past its handshake.
    pub(crate) fn establish(&self) {
        self.established.store(true, Ordering::SeqCst);
    }

    /// Every note: (past the handshake, bytes held, largest body taken).
    pub(crate) fn notes(&self) -> Vec<(bool, usize, usize)> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The stream of the conversation under test: a loopback TCP socket that records, after
/// every read, what the conversation holds ([`Stream::note_held`]). A server's also
/// reads its own answers to learn when its handshake is over (its welcome to a client
/// without a key, or its proof).
pub(crate) struct Watched {
    sock: TcpStream,
    watch: Arc<Watch>,
    /// The server's own frames, decoded as they go out.
    out: Option<Mutex<Decoder>>,
}

impl Watched {
    /// A client's stream: the test says when its handshake is over.
    pub(crate) fn client(sock: TcpStream, watch: Arc<Watch>) -> Watched {
        Watched {
            sock,
            watch,
            out: None,
        }
    }

    /// A server's stream: its handshake is over once it has welcomed a client without a
    /// key or sent its own proof.
    pub(crate) fn server(sock: TcpStream, watch: Arc<Watch>) -> Watched {
        Watched {
            sock,
            watch,
            out: Some(Mutex::new(Decoder::new())),
        }
    }
}

impl Read for Watched {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.sock.read(b)
    }
}

impl Write for Watched {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.sock.write(b)?;
        if let Some(out) = &self.out {
            let mut d = out.lock().unwrap_or_else(|e| e.into_inner());
            for f in d.feed_all(&b[..n]).unwrap_or_default() {
                let open = match f.kind {
                    FrameType::Welcome => {
                        serde_json::from_slice::<Welcome>(&f.body).is_ok_and(|w| !w.key_required)
                    }
                    FrameType::Auth => true,
                    _ => false,
                };
                if open {
                    self.watch.establish();
                }
            }
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

impl Stream for Watched {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(t)
    }
    fn peer_ip(&self) -> Option<IpAddr> {
        Stream::peer_ip(&self.sock)
    }
    fn local_ip(&self) -> Option<IpAddr> {
        Stream::local_ip(&self.sock)
    }
    fn addrs(&self) -> Option<(SocketAddr, SocketAddr)> {
        Stream::addrs(&self.sock)
    }
    fn shutdown(&self) {
        Stream::shutdown(&self.sock);
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.sock.as_raw_fd())
    }
    fn note_held(&self, held: usize, cap: usize) {
        let mut notes = self.watch.notes.lock().unwrap_or_else(|e| e.into_inner());
        if notes.len() < 10_000 {
            notes.push((self.watch.established.load(Ordering::SeqCst), held, cap));
        }
    }
}

/// The bytes of a frame of `kind` around `body`, whatever its size (a hostile peer's
/// header says what it likes).
pub(crate) fn framed(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.push(kind);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// How a hostile peer breaks the step of its script that is due.
#[derive(Clone, Debug)]
pub(crate) enum Break {
    /// Sends nothing more, and hangs up.
    Close,
    /// Sends nothing more, and keeps the connection open (the other side must give up
    /// within its deadline).
    Silence,
    /// The frame's body under another type.
    Retype(FrameType),
    /// An unasked-for frame of this type first (with the body due), then the step.
    Before(FrameType),
    /// The frame twice.
    Twice,
    /// The header and `keep` bytes of the body, then hangs up (`close`) or falls silent.
    Cut { keep: usize, close: bool },
    /// A header of this type announcing this many bytes, and `send` of them, then silence.
    Announce {
        /// The type in the header.
        kind: u8,
        /// The length in the header.
        len: u32,
        /// The body bytes that follow.
        send: usize,
    },
    /// These bytes for the body.
    Garbage(Vec<u8>),
    /// These bytes instead of the frame, and the step after them.
    Noise(Vec<u8>),
    /// The `leaf`th leaf of the JSON body (in document order, wrapping) replaced.
    Lie { leaf: usize, with: Value },
    /// A lie only this frame can tell (each target numbers its own).
    Named(usize),
}

impl Break {
    /// The variant's name (for the time each kind of break takes).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Break::Close => "close",
            Break::Silence => "silence",
            Break::Retype(_) => "retype",
            Break::Before(_) => "before",
            Break::Twice => "twice",
            Break::Cut { .. } => "cut",
            Break::Announce { .. } => "announce",
            Break::Garbage(_) => "garbage",
            Break::Noise(_) => "noise",
            Break::Lie { .. } => "lie",
            Break::Named(_) => "named",
        }
    }
}

/// With `SBFUZZ_STATS` set: how many sessions of each kind ran and how long they took,
/// printed when dropped (to see where a million sessions spend their time).
#[derive(Default)]
pub(crate) struct Stats(Option<Mutex<std::collections::BTreeMap<String, (u64, Duration)>>>);

impl Stats {
    /// Counting if `SBFUZZ_STATS` is set.
    pub(crate) fn from_env() -> Stats {
        Stats(std::env::var_os("SBFUZZ_STATS").map(|_| Mutex::default()))
    }

    /// One session of `kind` took `d`.
    pub(crate) fn add(&self, kind: impl FnOnce() -> String, d: Duration) {
        if let Some(m) = &self.0 {
            let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
            let e = m.entry(kind()).or_default();
            e.0 += 1;
            e.1 += d;
        }
    }
}

impl Drop for Stats {
    fn drop(&mut self) {
        if let Some(m) = &self.0 {
            let m = m.lock().unwrap_or_else(|e| e.into_inner());
            let total: Duration = m.values().map(|v| v.1).sum();
            for (k, (n, d)) in m.iter() {
                eprintln!(
                    "{k:>24}: {n:>8} sessions, {:>8.1} s, {:>6.2} ms each, {:>5.1} % of the time",
                    d.as_secs_f64(),
                    d.as_secs_f64() * 1e3 / *n as f64,
                    100.0 * d.as_secs_f64() / total.as_secs_f64()
                );
            }
        }
    }
}

/// What the script does after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// Goes on with its script.
    Go,
    /// Has hung up.
    Close,
    /// Says nothing more (and holds its connections open) until the test ends.
    Silence,
}

/// The bytes a peer sends for the step due (`kind` with `body`) when it breaks it with
/// `b` (`Named` lies are the target's: here they send the frame as it is), and what it
/// does then.
pub(crate) fn broken(kind: FrameType, body: &[u8], b: &Break) -> (Vec<u8>, After) {
    let k = kind as u8;
    match b {
        Break::Close => (Vec::new(), After::Close),
        Break::Silence => (Vec::new(), After::Silence),
        Break::Retype(t) => (framed(*t as u8, body), After::Go),
        Break::Before(t) => {
            let mut out = framed(*t as u8, body);
            out.extend(framed(k, body));
            (out, After::Go)
        }
        Break::Twice => {
            let mut out = framed(k, body);
            out.extend(framed(k, body));
            (out, After::Go)
        }
        Break::Cut { keep, close } => {
            let mut out = framed(k, body);
            out.truncate(HEADER + keep.min(&body.len().saturating_sub(1)));
            (out, if *close { After::Close } else { After::Silence })
        }
        Break::Announce { kind, len, send } => {
            let mut out = vec![*kind];
            out.extend_from_slice(&len.to_be_bytes());
            out.extend(std::iter::repeat(b'{').take(*send));
            (out, After::Silence)
        }
        Break::Garbage(g) => (framed(k, g), After::Go),
        Break::Noise(n) => {
            let mut out = n.clone();
            out.extend(framed(k, body));
            (out, After::Go)
        }
        Break::Lie { leaf, with } => (framed(k, &lie(body, *leaf, with.clone())), After::Go),
        Break::Named(_) => (framed(k, body), After::Go),
    }
}

/// Values no honest peer sends where a number, a string, a flag or a list is due.
pub(crate) fn hostile_values() -> Vec<Value> {
    use serde_json::json;
    vec![
        json!(-1),
        json!(-1.5),
        json!(0),
        json!(1.5),
        json!(1e300),
        json!(f64::MAX),
        json!(u64::MAX),
        json!(u32::MAX),
        json!(i64::MIN),
        json!(1u64 << 50),
        json!(3_600_000_000_000u64),
        json!(true),
        Value::Null,
        json!(""),
        json!("NaN"),
        json!("inf"),
        json!("\u{1b}]0;owned\u{7}\u{1b}[2J"),
        json!("../../../../etc/passwd"),
        json!("/proc/self/fd/0"),
        json!("x".repeat(70_000)),
        json!([]),
        json!([u64::MAX, u64::MAX]),
        json!({}),
        json!({"path": "/etc/passwd"}),
        json!({"address": "127.0.0.1:22"}),
        json!({"name": "/sockbench-1-0"}),
    ]
}

/// `body` (JSON) with its `leaf`th leaf (in document order, wrapping) replaced by `with`;
/// `body` itself if it is not JSON.
pub(crate) fn lie(body: &[u8], leaf: usize, with: Value) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return body.to_vec();
    };
    let n = leaves(&mut v).len();
    if n == 0 {
        return serde_json::to_vec(&with).expect("JSON");
    }
    if let Some(slot) = leaves(&mut v).into_iter().nth(leaf % n) {
        *slot = with;
    }
    serde_json::to_vec(&v).expect("JSON")
}

/// Every leaf of `v` (and every empty list or object), in document order.
fn leaves(v: &mut Value) -> Vec<&mut Value> {
    let nested = match v {
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => false,
    };
    if !nested {
        return vec![v];
    }
    match v {
        Value::Array(a) => a.iter_mut().flat_map(leaves).collect(),
        Value::Object(o) => o.values_mut().flat_map(leaves).collect(),
        _ => Vec::new(),
    }
}

/// A script's end of a data connection.
pub(crate) enum DataEnd {
    /// A TCP connection.
    Tcp(TcpStream),
    /// A Unix stream connection.
    Unix(std::os::unix::net::UnixStream),
    /// A FIFO's read or write end.
    Fifo(File),
}

impl DataEnd {
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            DataEnd::Tcp(s) => s.as_fd(),
            DataEnd::Unix(s) => s.as_fd(),
            DataEnd::Fifo(f) => f.as_fd(),
        }
    }

    pub(crate) fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            DataEnd::Tcp(s) => s.read(b),
            DataEnd::Unix(s) => s.read(b),
            DataEnd::Fifo(f) => f.read(b),
        }
    }

    pub(crate) fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            DataEnd::Tcp(s) => s.write(b),
            DataEnd::Unix(s) => s.write(b),
            DataEnd::Fifo(f) => f.write(b),
        }
    }

    /// Close with a reset where there is one (no TIME-WAIT).
    pub(crate) fn close(self) {
        if let DataEnd::Tcp(s) = &self {
            hang_up(s);
        }
    }
}

/// Wait (up to `until`) for `fd` to be readable (`read`) or writable.
pub(crate) fn ready(fd: std::os::fd::BorrowedFd<'_>, read: bool, until: Instant) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let left = until.saturating_duration_since(Instant::now());
    let flags = if read {
        PollFlags::POLLIN
    } else {
        PollFlags::POLLOUT
    };
    let mut fds = [PollFd::new(fd, flags)];
    let ms = PollTimeout::try_from(left).unwrap_or(PollTimeout::ZERO);
    matches!(poll(&mut fds, ms), Ok(n) if n > 0)
}

/// Read until the end of data (or `until`): the bytes.
pub(crate) fn drain(end: &mut DataEnd, until: Instant) -> u64 {
    let mut buf = [0u8; 16 << 10];
    let mut total = 0;
    while ready(end.fd(), true, until) {
        match end.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    total
}

/// Write `bytes` (up to `until`): how many went.
pub(crate) fn fill(end: &mut DataEnd, bytes: &[u8], until: Instant) -> u64 {
    let mut sent = 0;
    while sent < bytes.len() && ready(end.fd(), false, until) {
        match end.write(&bytes[sent..]) {
            Ok(n) => sent += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    sent as u64
}

/// Places a peer may name that no trust check lets through, each telling whether it was
/// opened, connected to or written anyway: Unix listeners and FIFOs named against each
/// rule (another process's name, a directory others may write, a directory reached
/// through a link), regular files under the names of FIFOs, a descriptor of this process
/// that is no socket, and a TCP listener held by another process.
pub(crate) struct Decoys {
    /// A private directory (0700) for the honest names of the scripts.
    pub(crate) private: tempfile::TempDir,
    _open: tempfile::TempDir,
    _hidden: tempfile::TempDir,
    _link: PathBuf,
    sockets: Vec<(PathBuf, UnixListener)>,
    fifos: Vec<(PathBuf, File)>,
    files: Vec<(PathBuf, File)>,
    tcp: Option<(SocketAddr, std::process::Child)>,
}

/// What a decoy file holds; it must hold it still.
const DECOY_TEXT: &[u8] = b"a file nobody was told to write\n";

impl Decoys {
    /// Make them (under the temporary directory).
    pub(crate) fn new() -> Decoys {
        let me = std::process::id();
        let dir = |prefix: &str| {
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .expect("a temporary directory")
        };
        let private = dir("sbfuzz");
        let open = dir("sbfuzz-open");
        std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let hidden = dir("sbfuzz-hidden");
        let link = std::env::temp_dir().join(format!(
            "sbfuzz-link-{me}-{}",
            hidden.path().file_name().unwrap().to_string_lossy()
        ));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(hidden.path(), &link).expect("symlink");
        // Where a name is refused: its file name, the directory's mode, the link.
        let places = |stem: &str| -> Vec<(PathBuf, PathBuf)> {
            let good = format!("sb{me}-{stem}-9");
            vec![
                (private.path().join(format!("decoy-{stem}")), PathBuf::new()),
                (private.path().join(format!("sb1-{stem}-9")), PathBuf::new()),
                (open.path().join(&good), PathBuf::new()),
                (hidden.path().join(&good), link.join(&good)),
            ]
        };
        let named = |(real, shown): (PathBuf, PathBuf)| {
            let shown = if shown.as_os_str().is_empty() {
                real.clone()
            } else {
                shown
            };
            (real, shown)
        };
        let mut sockets = Vec::new();
        for (real, shown) in places("unix").into_iter().map(named) {
            let l = UnixListener::bind(&real).expect("a decoy socket");
            l.set_nonblocking(true).expect("non-blocking");
            sockets.push((shown, l));
        }
        let mut fifos = Vec::new();
        for (real, shown) in places("fifo").into_iter().map(named) {
            nix::unistd::mkfifo(&real, nix::sys::stat::Mode::from_bits_truncate(0o600))
                .expect("a decoy FIFO");
            let r = nix::fcntl::open(
                &real,
                nix::fcntl::OFlag::O_RDONLY
                    | nix::fcntl::OFlag::O_NONBLOCK
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .expect("the decoy FIFO's read end");
            fifos.push((shown, File::from(crate::sys::own_fd(r))));
        }
        // Regular files under a FIFO's or a socket's name, and one only this process's
        // descriptor reaches.
        let mut files = Vec::new();
        for p in [
            private.path().join(format!("sb{me}-fifo-8")),
            private.path().join(format!("sb{me}-unix-8")),
            private.path().join("plain"),
        ] {
            std::fs::write(&p, DECOY_TEXT).expect("a decoy file");
            let f = File::open(&p).expect("open");
            files.push((p, f));
        }
        let fd = files[2].1.as_raw_fd();
        let by_fd = PathBuf::from(format!("/proc/{me}/fd/{fd}"));
        files.push((by_fd, File::open(&files[2].0).expect("open")));
        Decoys {
            private,
            _open: open,
            _hidden: hidden,
            _link: link,
            sockets,
            fifos,
            files,
            tcp: tcp_elsewhere(),
        }
    }

    /// Every decoy, as a peer would name it.
    pub(crate) fn endpoints(&self) -> Vec<Endpoint> {
        let mut out: Vec<Endpoint> = (self.sockets.iter().map(|s| &s.0))
            .chain(self.fifos.iter().map(|f| &f.0))
            .chain(self.files.iter().map(|f| &f.0))
            .map(|p| Endpoint::Path(p.clone()))
            .collect();
        out.extend(self.tcp.as_ref().map(|t| Endpoint::Address(t.0)));
        out.extend([
            Endpoint::Address("127.0.0.1:0".parse().unwrap()),
            Endpoint::Address("192.0.2.1:5290".parse().unwrap()),
            Endpoint::Path("/dev/null".into()),
            Endpoint::Path("relative/sb1-fifo-0".into()),
            Endpoint::Name("/sockbench-1-0".into()),
        ]);
        out
    }

    /// What was opened, connected to or written, if anything.
    pub(crate) fn touched(&self) -> Option<String> {
        for (p, l) in &self.sockets {
            if l.accept().is_ok() {
                return Some(format!(
                    "a connection came to the decoy socket {}",
                    p.display()
                ));
            }
        }
        for (p, f) in &self.fifos {
            let mut buf = [0u8; 64];
            if matches!((&*f).read(&mut buf), Ok(n) if n > 0) {
                return Some(format!("the decoy FIFO {} was written", p.display()));
            }
        }
        for (p, _) in self.files.iter().take(3) {
            if std::fs::read(p).ok().as_deref() != Some(DECOY_TEXT) {
                // As it was, so that the next session (a smaller case) is judged afresh.
                let _ = std::fs::write(p, DECOY_TEXT);
                return Some(format!("the decoy file {} was written", p.display()));
            }
        }
        if let Some((at, _)) = &self.tcp {
            let found =
                crate::transport::owner::lookup(crate::transport::owner::Proto::Tcp, *at, None);
            if matches!(found, Ok(Some(f)) if f.queued > 0) {
                return Some(format!(
                    "a connection came to the other process's listener {at}"
                ));
            }
        }
        None
    }

    /// A path in the private directory for an honest name of a script (never a decoy's).
    pub(crate) fn name(&self, stem: &str, n: u64) -> PathBuf {
        self.private
            .path()
            .join(format!("sb{}-{stem}-{}", std::process::id(), 100 + n))
    }
}

impl Drop for Decoys {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self._link);
        if let Some((_, child)) = &mut self.tcp {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A TCP listener on loopback held by another process only (`cat`, which inherits it and
/// ends when this process does): its address and the process, or None where no `cat`
/// can be started.
fn tcp_elsewhere() -> Option<(SocketAddr, std::process::Child)> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let l = TcpListener::bind("127.0.0.1:0").ok()?;
    let at = l.local_addr().ok()?;
    fcntl(l.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::empty())).ok()?;
    let child = std::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .ok();
    drop(l);
    Some((at, child?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzz targets' oracle: a decoy tells when it was connected to or written.
    #[test]
    fn a_decoy_tells_when_it_was_opened_connected_to_or_written() {
        let d = Decoys::new();
        assert_eq!(d.touched(), None);
        for (p, _) in &d.sockets {
            let _c = std::os::unix::net::UnixStream::connect(p).unwrap();
            assert!(
                d.touched().unwrap().contains("decoy socket"),
                "{}",
                p.display()
            );
        }
        for (p, _) in &d.fifos {
            let mut w = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            w.write_all(b"x").unwrap();
            assert!(d.touched().unwrap().contains("FIFO"), "{}", p.display());
        }
        for (p, _) in d.files.iter().take(3) {
            std::fs::write(p, b"overwritten").unwrap();
            assert!(
                d.touched().unwrap().contains("decoy file"),
                "{}",
                p.display()
            );
            std::fs::write(p, DECOY_TEXT).unwrap();
        }
        assert_eq!(d.touched(), None);
        if let Some((at, _)) = &d.tcp {
            let _c = TcpStream::connect(at).unwrap();
            assert!(d.touched().unwrap().contains("other process"));
        }
        let named = lie(br#"{"a":[1,{"b":"x"}],"c":true}"#, 1, serde_json::json!(-1));
        assert_eq!(named, br#"{"a":[1,{"b":-1}],"c":true}"#);
    }
}

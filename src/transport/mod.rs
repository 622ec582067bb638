//! Transports: what carries the bytes between the two sides of a workload.
//!
//! Every transport with a name has two halves that can run apart, as in two processes or
//! on two hosts: [`listen`] (the receiving side binds or creates, and publishes an
//! [`Endpoint`]) and [`connect`] (the sending side dials or opens that endpoint); the
//! listener then [`Listener::accept`]s. Today's connected [`Pair`] is built from the two
//! halves. Anonymous transports (`socketpair`, `pipe`) have no name: they are pairs only,
//! and another process gets one end by inheritance. Engines and workloads only ever see
//! `Conn`. Every file-system name a transport makes (socket file, FIFO, message queue,
//! shared-memory object) is removed as soon as both ends are open, so an interrupted or
//! killed run leaves nothing behind.
//!
//! This module does not time or count anything; that is the workload's job.

pub mod connector;
pub mod owner;
pub mod route;
pub mod run_dir;

pub use route::{canonical_ip, is_local_address, route_between, route_of};
pub use run_dir::{default_dir_base, RunDir, UNIX_PATH_MAX};
mod mq;
pub use mq::max_depth as mq_max_depth;
mod pipe;
mod shm;
mod tcp;
mod udp;
mod unix;

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// The transport the user selects.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// Unix-domain stream socket (`SOCK_STREAM`) on a socket file.
    #[default]
    Unix,
    /// Unix-domain datagram socket (`SOCK_DGRAM`): reliable and ordered on Linux.
    UnixDgram,
    /// Unix-domain sequenced-packet socket (`SOCK_SEQPACKET`).
    UnixSeqpacket,
    /// A connected pair of Unix stream sockets (`socketpair`), no file-system name.
    Socketpair,
    /// TCP over IPv4 (127.0.0.1 unless `--bind`/`--connect` say otherwise).
    Tcp,
    /// TCP over IPv6 (::1 by default).
    Tcp6,
    /// UDP over IPv4: datagrams can be lost; loss is counted.
    Udp,
    /// UDP over IPv6.
    Udp6,
    /// An anonymous pipe (`pipe2`).
    Pipe,
    /// A named pipe (`mkfifo`) in the run's private directory.
    Fifo,
    /// A POSIX message queue (`mq_open`).
    Mq,
    /// A shared-memory ring: no kernel in the data path, the reference for copy cost.
    Shm,
}

impl TransportKind {
    /// Every transport, in the order tables list them.
    pub const ALL: [TransportKind; 12] = [
        TransportKind::Unix,
        TransportKind::UnixDgram,
        TransportKind::UnixSeqpacket,
        TransportKind::Socketpair,
        TransportKind::Tcp,
        TransportKind::Tcp6,
        TransportKind::Udp,
        TransportKind::Udp6,
        TransportKind::Pipe,
        TransportKind::Fifo,
        TransportKind::Mq,
        TransportKind::Shm,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Unix => "unix",
            TransportKind::UnixDgram => "unix-dgram",
            TransportKind::UnixSeqpacket => "unix-seqpacket",
            TransportKind::Tcp => "tcp",
            TransportKind::Tcp6 => "tcp6",
            TransportKind::Udp => "udp",
            TransportKind::Udp6 => "udp6",
            TransportKind::Pipe => "pipe",
            TransportKind::Fifo => "fifo",
            TransportKind::Socketpair => "socketpair",
            TransportKind::Mq => "mq",
            TransportKind::Shm => "shm",
        }
    }

    /// Whether one send is one message at the receiver (datagram-like) or a byte stream.
    pub fn framing(self) -> Framing {
        match self {
            TransportKind::UnixDgram
            | TransportKind::UnixSeqpacket
            | TransportKind::Udp
            | TransportKind::Udp6
            | TransportKind::Mq => Framing::Message,
            _ => Framing::Stream,
        }
    }

    /// Whether `--batch` can put several messages in one system call (`sendmmsg`/
    /// `recvmmsg`): datagram and sequenced-packet sockets. Byte streams would merge the
    /// messages, and pipes, message queues and the shared-memory ring have no such call.
    pub fn batches(self) -> bool {
        matches!(
            self,
            TransportKind::UnixDgram
                | TransportKind::UnixSeqpacket
                | TransportKind::Udp
                | TransportKind::Udp6
        )
    }

    /// Whether everything sent is delivered (so both sides' counts must agree).
    pub fn reliable(self) -> bool {
        !matches!(self, TransportKind::Udp | TransportKind::Udp6)
    }

    /// Whether the transport needs a file-system path (socket file or FIFO).
    pub fn uses_path(self) -> bool {
        matches!(
            self,
            TransportKind::Unix
                | TransportKind::UnixDgram
                | TransportKind::UnixSeqpacket
                | TransportKind::Fifo
        )
    }

    /// Whether a side waits by spinning on the CPU (shm's ring: a full or empty ring is
    /// polled before the side yields), so a peer that needs that CPU cannot run.
    pub fn spins(self) -> bool {
        self == TransportKind::Shm
    }

    /// Whether the transport runs over IP and so takes `--bind`/`--connect`.
    pub fn is_ip(self) -> bool {
        matches!(
            self,
            TransportKind::Tcp | TransportKind::Tcp6 | TransportKind::Udp | TransportKind::Udp6
        )
    }

    /// Whether the transport is IPv6.
    pub fn is_ipv6(self) -> bool {
        matches!(self, TransportKind::Tcp6 | TransportKind::Udp6)
    }

    /// The message size a bulk transfer uses when `--size` is not given: 64 KiB, but
    /// 1472 B for UDP (a datagram that fits a 1500-byte Ethernet MTU) and 8 KiB for mq
    /// (the default `fs.mqueue.msgsize_max`).
    pub fn default_stream_size(self) -> u64 {
        match self {
            TransportKind::Udp | TransportKind::Udp6 => 1472,
            TransportKind::Mq => 8 << 10,
            _ => 64 << 10,
        }
    }

    /// The largest message `transport` can carry with the requested send buffer, and what
    /// sets that limit; `None` for byte streams (no limit).
    pub fn max_message(self, sndbuf: Option<u64>, sys: &SystemLimits) -> Option<(u64, String)> {
        let transport = self;
        match transport {
            TransportKind::Udp => Some((
                65_507,
                "a UDP datagram over IPv4 carries at most 65507 bytes (the IP packet limit; no sysctl raises it)".into(),
            )),
            TransportKind::Udp6 => Some((
                65_527,
                "a UDP datagram over IPv6 carries at most 65527 bytes (the IPv6 payload limit; no sysctl raises it)".into(),
            )),
            TransportKind::UnixDgram | TransportKind::UnixSeqpacket => {
                // The kernel refuses a datagram larger than the socket send buffer minus 32
                // bytes (net/unix/af_unix.c); SO_SNDBUF is doubled and capped by wmem_max.
                let (wmem_max, wmem_default) = (sys.wmem_max, sys.wmem_default);
                let buf = match sndbuf {
                    Some(n) => 2 * n.min(wmem_max),
                    None => wmem_default,
                };
                let how = match sndbuf {
                    Some(n) if n <= wmem_max => format!(
                        "--sndbuf {n} gives a send buffer of {} bytes; raise --sndbuf (up to net.core.wmem_max = {wmem_max})",
                        2 * n
                    ),
                    Some(_) => format!(
                        "net.core.wmem_max = {wmem_max} caps --sndbuf; raise it with `sysctl -w net.core.wmem_max=...`"
                    ),
                    None => format!(
                        "the send buffer defaults to net.core.wmem_default = {wmem_default}; raise it with --sndbuf (up to net.core.wmem_max = {wmem_max})"
                    ),
                };
                Some((
                    buf.saturating_sub(32),
                    format!("a {transport} message must fit the socket send buffer minus 32 bytes ({how})"),
                ))
            }
            TransportKind::Mq => {
                let max = sys.mq_msgsize_max;
                if sys.cap_sys_resource {
                    Some((16 << 20, "a message queue message is at most 16 MiB (the kernel's HARD_MSGSIZEMAX)".into()))
                } else {
                    Some((
                        max,
                        format!("a message queue message is at most fs.mqueue.msgsize_max = {max} bytes; raise it with sysctl"),
                    ))
                }
            }
            _ => None,
        }
    }

    /// Whether `--sndbuf`/`--rcvbuf` mean socket buffers (`SO_SNDBUF`/`SO_RCVBUF`).
    pub fn is_socket(self) -> bool {
        !matches!(
            self,
            TransportKind::Pipe | TransportKind::Fifo | TransportKind::Mq | TransportKind::Shm
        )
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The machine's limits on what a transport can carry, as probed once before planning
/// (`plan::Host`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemLimits {
    /// `net.core.wmem_max`: the largest SO_SNDBUF an unprivileged request gets.
    pub wmem_max: u64,
    /// `net.core.wmem_default`: the send buffer when none is requested.
    pub wmem_default: u64,
    /// `fs.mqueue.msgsize_max`: the largest message-queue message.
    pub mq_msgsize_max: u64,
    /// CAP_SYS_RESOURCE: may exceed the message-queue sysctls (up to the kernel's hard
    /// limits); being root is not enough inside many containers.
    pub cap_sys_resource: bool,
}

/// How messages map onto the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// A byte stream: writes may be split or merged.
    Stream,
    /// One send is one message at the receiver.
    Message,
}

/// Everything a transport needs to open a pair. Built by the plan from the options.
#[derive(Clone, Debug, Default)]
pub struct TransportOptions {
    /// Requested send buffer in bytes (`SO_SNDBUF`, pipe size, ring size).
    pub sndbuf: Option<usize>,
    /// Requested receive buffer in bytes (`SO_RCVBUF`).
    pub rcvbuf: Option<usize>,
    /// Disable Nagle's algorithm on TCP.
    pub nodelay: bool,
    /// Address (and optional port) the receiving side binds to, for IP transports.
    pub bind: Option<SocketAddr>,
    /// Address the sending side connects to, for IP transports (default: the bound one).
    pub connect: Option<IpAddr>,
    /// Directory for socket files and FIFOs.
    pub dir: PathBuf,
    /// Largest message the workload will send (sizes message queues).
    pub message_bytes: usize,
    /// The uid a message queue or ring that a peer named must belong to before this side
    /// writes it (`placement::trust`); None for the process's own objects.
    pub peer_uid: Option<u32>,
    /// How long a TCP or Unix stream listener waits for its peer's connection (None:
    /// [`ACCEPT_WAIT`]). A run over a control connection, whose peer has connected before
    /// it says so, waits no longer than one of its steps.
    pub accept_wait: Option<Duration>,
    /// The token a peer's data connection opens with (a run over a control connection,
    /// on a connection-oriented socket): a TCP or Unix stream listener reads it from
    /// each connection it accepts and drops one that does not send it (a stranger, a
    /// port scan) and waits on for the real one. None: the first connection is taken.
    pub token: Option<Vec<u8>>,
}

/// How long a listener waits for its peer's connection, unless told otherwise.
pub const ACCEPT_WAIT: Duration = Duration::from_secs(5);

/// What the kernel actually granted for a pair, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// The sender's send buffer as the kernel reports it (`SO_SNDBUF`, pipe size, ring size).
    pub sndbuf_bytes: Option<u64>,
    /// The receiver's receive buffer as the kernel reports it (`SO_RCVBUF`).
    pub rcvbuf_bytes: Option<u64>,
    /// TCP maximum segment size of the sending socket.
    pub mss_bytes: Option<u64>,
    /// The device the data goes through (IP transports).
    pub route: Option<String>,
    /// That device's MTU.
    pub mtu_bytes: Option<u64>,
    /// Where the receiving side listened (address:port or path), for the report.
    pub endpoint: Option<String>,
}

/// One end of an open transport. Blocking by default; engines may change that.
pub trait Conn: Send {
    /// Send up to `buf.len()` bytes (a whole message for message transports).
    fn send(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Receive into `buf`. `Ok(0)` means the peer finished (end of data).
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Send each of `msgs` as one whole message, in as few calls as this end can (one
    /// `sendmmsg` on a datagram socket, one submission on io-uring); returns how many went
    /// out, a prefix of `msgs` (at least one unless it fails). By default: one `send`.
    fn send_batch(&mut self, msgs: &[&[u8]]) -> io::Result<usize> {
        match msgs.first() {
            Some(m) => self.send(m).map(|_| 1),
            None => Ok(0),
        }
    }
    /// Receive up to `bufs.len()` messages, one per buffer, in as few calls as this end
    /// can (one `recvmmsg`, one submission), waiting for the first as `recv` does; each
    /// message's length goes to `lens` (0: the end marker); returns how many arrived (at
    /// least one unless it fails). By default: one `recv`.
    fn recv_batch(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
        match (bufs.first_mut(), lens.first_mut()) {
            (Some(b), Some(l)) => {
                *l = self.recv(b)?;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
    /// Byte streams: write all of `buf`, `n` times in a row, the buffer borrowed for the
    /// call, in as few submissions as this end can (io-uring: up to `n` writes in flight
    /// at once, in order); returns once every write completed. By default: `send` in a
    /// loop over partial writes, one call each.
    ///
    /// # Errors
    /// As `send`; what went out before the error is lost to the count.
    fn send_repeated(&mut self, buf: &[u8], n: usize) -> io::Result<Repeated> {
        let mut done = Repeated::default();
        for _ in 0..n {
            let mut off = 0;
            while off < buf.len() {
                done.calls += 1;
                match self.send(&buf[off..]) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(k) => off += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            done.bytes += buf.len() as u64;
        }
        Ok(done)
    }
    /// Byte streams: receive the next bytes where this end likes, into `buf` or into
    /// buffers of its own (io-uring: a multishot receive into provided buffers, handed
    /// back unread); returns how many arrived, 0 at the end. By default: `recv`.
    fn recv_stream(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf)
    }
    /// io-uring: what the ring of this end used and did so far (`None` for other
    /// engines, or before the ring's first operation).
    fn uring(&self) -> Option<crate::vocab::uring_use::UringUse> {
        None
    }
    /// Tell the receiver that no more data follows: shut down, close, or send the
    /// transport's end marker (an empty message on message transports).
    fn finish(&mut self) -> io::Result<()>;
    /// Bound how long `recv` may block (`None`: forever). Only needed on unreliable
    /// transports, where the end marker itself can be lost.
    fn set_recv_timeout(&mut self, _timeout: Option<Duration>) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// The descriptor, for engines that wait for readiness (`None` for `shm`).
    fn raw_fd(&self) -> Option<RawFd>;
    /// The descriptor sends go to (differs from `raw_fd` for a pair of one-way channels).
    fn send_fd(&self) -> Option<RawFd> {
        self.raw_fd()
    }
    /// The descriptor receives come from.
    fn recv_fd(&self) -> Option<RawFd> {
        self.raw_fd()
    }
    /// Socket send and receive buffer sizes as the kernel reports them now (they grow
    /// during a TCP run with autotuning); `None` where the transport has no such buffers.
    fn socket_buffers(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
    }
    /// The TCP maximum segment size, for TCP.
    fn mss(&self) -> Option<u64> {
        None
    }
    /// Something another thread can call to wake a role blocked on this end when its run
    /// is abandoned (its peer process died): a socket is shut down, a ring or a queue is
    /// told the data ended. `None` where the peer's death wakes it anyway (pipes, FIFOs).
    fn waker(&self) -> Option<Waker> {
        None
    }
}

/// What [`Conn::send_repeated`] did: the bytes the kernel reported written and the calls
/// (submissions) that took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repeated {
    /// Bytes written, as the kernel reported them.
    pub bytes: u64,
    /// System calls or ring submissions made.
    pub calls: u64,
}

/// Wakes a role blocked on its end (see [`Conn::waker`]).
pub type Waker = Box<dyn Fn() + Send + Sync>;

/// Both ends of a freshly opened transport.
pub struct Pair {
    /// The sending end (connects).
    pub sender: Box<dyn Conn>,
    /// The receiving end (binds, listens, creates).
    pub receiver: Box<dyn Conn>,
    /// What the kernel granted.
    pub info: LinkInfo,
}

/// Where a listening transport can be reached: all a peer needs to connect. It crosses a
/// process or host boundary as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Endpoint {
    /// An IP address and port (tcp, tcp6, udp, udp6).
    Address(SocketAddr),
    /// A file-system path (unix, unix-dgram, unix-seqpacket, fifo).
    Path(PathBuf),
    /// A POSIX IPC object name (mq, shm).
    Name(String),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Address(a) => write!(f, "{a}"),
            Endpoint::Path(p) => write!(f, "{}", p.display()),
            Endpoint::Name(n) => f.write_str(n),
        }
    }
}

/// The receiving half of a transport: bound or created, waiting for its peer.
pub trait Listener: Send {
    /// Where a peer connects.
    fn endpoint(&self) -> &Endpoint;
    /// The receiving end, once the peer has connected (or opened the object), and what the
    /// kernel granted on this side. `peer` is the connecting end's own endpoint when it
    /// has one (a datagram socket answers it). The name this listener made is removed.
    ///
    /// # Errors
    /// No peer within the wait, Ctrl-C, or the setup failing.
    fn accept(
        self: Box<Self>,
        peer: Option<&Endpoint>,
    ) -> anyhow::Result<(Box<dyn Conn>, LinkInfo)>;
}

/// The sending half, connected.
pub struct Connected {
    /// The sending end.
    pub conn: Box<dyn Conn>,
    /// Its own endpoint, for a listener that answers it (UDP, unix-dgram).
    pub local: Option<Endpoint>,
}

/// Why `kind` has no halves.
fn anonymous(kind: TransportKind) -> anyhow::Error {
    anyhow::anyhow!(
        "{kind} has no name to listen on or connect to: it exists only as a pair, and another process \
         gets one end by inheritance"
    )
}

/// Whether `e` says only that the peer went away or was not there (refused, reset,
/// aborted, a broken pipe, not connected, an early end): what one side sees when the
/// other failed, the consequence of a failure elsewhere, never its cause.
pub fn peer_gone(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{
        BrokenPipe, ConnectionAborted, ConnectionRefused, ConnectionReset, NotConnected,
        UnexpectedEof,
    };
    matches!(
        e.kind(),
        BrokenPipe
            | ConnectionAborted
            | ConnectionRefused
            | ConnectionReset
            | NotConnected
            | UnexpectedEof
    )
}

/// The receiving half: bind or create `kind` (`id` makes names unique within the run).
///
/// # Errors
/// Setup failures (address in use, permission, limits), with the address or path named;
/// a transport without a name.
pub fn listen(
    kind: TransportKind,
    opts: &TransportOptions,
    id: usize,
) -> anyhow::Result<Box<dyn Listener>> {
    match kind {
        TransportKind::Unix => unix::listen(unix::Flavor::Stream, opts, id),
        TransportKind::UnixDgram => unix::listen(unix::Flavor::Dgram, opts, id),
        TransportKind::UnixSeqpacket => unix::listen(unix::Flavor::Seqpacket, opts, id),
        TransportKind::Tcp | TransportKind::Tcp6 => tcp::listen(kind.is_ipv6(), opts),
        TransportKind::Udp | TransportKind::Udp6 => udp::listen(kind.is_ipv6(), opts),
        TransportKind::Fifo => pipe::listen(opts, id),
        TransportKind::Mq => mq::listen(opts, id),
        TransportKind::Shm => shm::listen(opts, id),
        TransportKind::Socketpair | TransportKind::Pipe => Err(anonymous(kind)),
    }
}

/// The receiving half of a datagram transport of `kind` (udp, udp6) on a port that
/// other runs share: see `udp::listen_shared`.
///
/// # Errors
/// As [`listen`]; any other transport.
pub fn listen_shared(
    kind: TransportKind,
    opts: &TransportOptions,
) -> anyhow::Result<Box<dyn Listener>> {
    match kind {
        TransportKind::Udp | TransportKind::Udp6 => udp::listen_shared(kind.is_ipv6(), opts),
        _ => anyhow::bail!("{kind} has no shared datagram port"),
    }
}

pub use tcp::{adopt as adopt_tcp, listen_shared as listen_shared_tcp};

/// The sending half: dial or open the `endpoint` a listener of `kind` published.
///
/// # Errors
/// The peer cannot be reached, with the endpoint named; a transport without a name.
pub fn connect(
    kind: TransportKind,
    endpoint: &Endpoint,
    opts: &TransportOptions,
) -> anyhow::Result<Connected> {
    match (kind, endpoint) {
        (TransportKind::Unix, Endpoint::Path(p)) => unix::connect(unix::Flavor::Stream, p, opts),
        (TransportKind::UnixDgram, Endpoint::Path(p)) => {
            unix::connect(unix::Flavor::Dgram, p, opts)
        }
        (TransportKind::UnixSeqpacket, Endpoint::Path(p)) => {
            unix::connect(unix::Flavor::Seqpacket, p, opts)
        }
        (TransportKind::Tcp | TransportKind::Tcp6, Endpoint::Address(a)) => tcp::connect(*a, opts),
        (TransportKind::Udp | TransportKind::Udp6, Endpoint::Address(a)) => udp::connect(*a, opts),
        (TransportKind::Fifo, Endpoint::Path(p)) => pipe::connect(p),
        (TransportKind::Mq, Endpoint::Name(n)) => mq::connect(n, opts.peer_uid),
        (TransportKind::Shm, Endpoint::Name(n)) => shm::connect(n, opts.peer_uid),
        (TransportKind::Socketpair | TransportKind::Pipe, _) => Err(anonymous(kind)),
        (kind, e) => anyhow::bail!("{kind} cannot connect to {e}: not an endpoint of {kind}"),
    }
}

/// Open a connected pair over `kind`: the two halves, one after the other, as two
/// processes would. `id` makes file-system names unique within the run.
///
/// # Errors
/// Setup failures (address in use, permission, limits), with the address or path named.
pub fn open_pair(kind: TransportKind, opts: &TransportOptions, id: usize) -> anyhow::Result<Pair> {
    match kind {
        TransportKind::Socketpair => return unix::socketpair(opts),
        TransportKind::Pipe => return pipe::anonymous(opts),
        _ => {}
    }
    let listener = listen(kind, opts, id)?;
    let endpoint = listener.endpoint().clone();
    let sender = connect(kind, &endpoint, opts)?;
    let (receiver, mut info) = listener.accept(sender.local.as_ref())?;
    let (sndbuf, _) = sender.conn.socket_buffers();
    info.sndbuf_bytes = sndbuf.or(info.sndbuf_bytes);
    info.mss_bytes = sender.conn.mss();
    if let Some((dev, mtu)) = route_of(sender.conn.as_ref()) {
        info.route = Some(dev);
        info.mtu_bytes = mtu;
    }
    info.endpoint = Some(match (&endpoint, opts.connect) {
        // The address the sender dialled (--connect may name another of this host's).
        (Endpoint::Address(a), Some(ip)) => SocketAddr::new(ip, a.port()).to_string(),
        (e, _) => e.to_string(),
    });
    Ok(Pair {
        sender: sender.conn,
        receiver,
        info,
    })
}

/// Open a pair whose ends can both send and receive (for request/response workloads).
/// Sockets are duplex already; one-way transports (pipe, fifo, mq, shm) get a second
/// channel in the other direction. `Pair::sender` is the side that starts each exchange.
///
/// # Errors
/// As [`open_pair`].
pub fn open_duplex(
    kind: TransportKind,
    opts: &TransportOptions,
    id: usize,
) -> anyhow::Result<Pair> {
    if kind.is_socket() {
        return open_pair(kind, opts, id);
    }
    let forward = open_pair(kind, opts, id)?;
    let backward = open_pair(kind, opts, id + (1 << 32))?;
    Ok(Pair {
        sender: Box::new(Duplex {
            tx: forward.sender,
            rx: backward.receiver,
        }),
        receiver: Box::new(Duplex {
            tx: backward.sender,
            rx: forward.receiver,
        }),
        info: forward.info,
    })
}

/// Two one-way channels in opposite directions used as one two-way end: sends go to
/// `tx`, receives come from `rx`.
pub fn duplex(tx: Box<dyn Conn>, rx: Box<dyn Conn>) -> Box<dyn Conn> {
    Box::new(Duplex { tx, rx })
}

/// An end of an anonymous transport that a parent sockbench handed down to this child
/// process (`--placement processes`): a socketpair end, or a pipe's read end (`reading`)
/// or write end.
///
/// # Errors
/// A transport that is not anonymous.
pub fn inherited(
    kind: TransportKind,
    fd: std::os::fd::OwnedFd,
    reading: bool,
) -> anyhow::Result<Box<dyn Conn>> {
    match kind {
        TransportKind::Socketpair => Ok(SocketConn::boxed(socket2::Socket::from(fd), false)),
        TransportKind::Pipe => Ok(pipe::end(fd, reading)),
        _ => Err(anyhow::anyhow!(
            "{kind} is not handed down: it has a name to open"
        )),
    }
}

/// A placeholder for sides that make their own connections (the `connect` workload):
/// every operation fails.
pub fn unconnected() -> Box<dyn Conn> {
    Box::new(Unconnected)
}

struct Unconnected;

impl Conn for Unconnected {
    fn send(&mut self, _buf: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::NotConnected.into())
    }
    fn recv(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::NotConnected.into())
    }
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}

/// Two one-way channels in opposite directions, used as one duplex `Conn`.
struct Duplex {
    tx: Box<dyn Conn>,
    rx: Box<dyn Conn>,
}

impl Conn for Duplex {
    fn waker(&self) -> Option<Waker> {
        let (a, b) = (self.tx.waker(), self.rx.waker());
        if a.is_none() && b.is_none() {
            return None;
        }
        Some(Box::new(move || {
            a.iter().chain(b.iter()).for_each(|w| w());
        }))
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx.send(buf)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.rx.recv(buf)
    }
    fn finish(&mut self) -> io::Result<()> {
        self.tx.finish()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        self.rx.raw_fd()
    }
    fn send_fd(&self) -> Option<RawFd> {
        self.tx.send_fd()
    }
    fn recv_fd(&self) -> Option<RawFd> {
        self.rx.recv_fd()
    }
}

/// A `Conn` over any connected socket (`socket2::Socket`); message sockets signal the end
/// with an empty datagram, stream-like ones with `shutdown(SHUT_WR)`.
/// Datagram and sequenced-packet sockets batch with `sendmmsg`/`recvmmsg`; byte streams
/// send one message per call (a batch would not keep messages apart).
pub(crate) struct SocketConn {
    sock: socket2::Socket,
    end_with_empty_message: bool,
    /// The `sendmmsg`/`recvmmsg` arrays, on sockets that keep messages apart.
    batch: Option<crate::sys::mmsg::Batch>,
}

impl SocketConn {
    pub(crate) fn boxed(sock: socket2::Socket, end_with_empty_message: bool) -> Box<dyn Conn> {
        let messages = matches!(
            sock.r#type(),
            Ok(socket2::Type::DGRAM | socket2::Type::SEQPACKET)
        );
        Box::new(SocketConn {
            sock,
            end_with_empty_message,
            batch: messages.then(crate::sys::mmsg::Batch::new),
        })
    }
}

impl Conn for SocketConn {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        io::Write::write(&mut self.sock, buf)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        io::Read::read(&mut self.sock, buf)
    }
    /// One `sendmmsg` on a datagram or sequenced-packet socket.
    fn send_batch(&mut self, msgs: &[&[u8]]) -> io::Result<usize> {
        let fd = self.sock.as_raw_fd();
        match &mut self.batch {
            Some(b) => b.send(fd, msgs),
            None => msgs.first().map_or(Ok(0), |m| self.send(m).map(|_| 1)),
        }
    }
    /// One `recvmmsg(MSG_WAITFORONE)` on a datagram or sequenced-packet socket.
    fn recv_batch(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
        let fd = self.sock.as_raw_fd();
        match (&mut self.batch, bufs.first_mut(), lens.first_mut()) {
            (Some(b), _, _) => b.recv(fd, bufs, lens, false),
            (None, Some(buf), Some(len)) => {
                *len = self.recv(buf)?;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
    fn finish(&mut self) -> io::Result<()> {
        if self.end_with_empty_message {
            self.sock.send(&[]).map(drop)
        } else {
            self.sock.shutdown(std::net::Shutdown::Write)
        }
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(timeout)
    }
    fn waker(&self) -> Option<Waker> {
        // A duplicate of the descriptor: shutting it down wakes the role, and no other
        // socket can ever get its number while the waker holds it.
        let dup = self.sock.try_clone().ok()?;
        Some(Box::new(move || {
            let _ = dup.shutdown(std::net::Shutdown::Both);
        }))
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.sock.as_fd().as_raw_fd())
    }
    fn socket_buffers(&self) -> (Option<u64>, Option<u64>) {
        (
            self.sock.send_buffer_size().ok().map(|n| n as u64),
            self.sock.recv_buffer_size().ok().map(|n| n as u64),
        )
    }
    /// TCP_MAXSEG; other sockets refuse the option (`None`).
    fn mss(&self) -> Option<u64> {
        self.sock.mss().ok().map(u64::from)
    }
}

/// Accept the sender's connection on `listener`: without blocking forever (a deadline, and
/// Ctrl-C is checked), and only from `expected` when given (another peer's connection is
/// dropped). `what` names the listener in errors.
pub(crate) fn accept_from(
    listener: &socket2::Socket,
    expected: Option<std::net::SocketAddr>,
    what: &str,
    wait: Duration,
    token: Option<&[u8]>,
) -> anyhow::Result<socket2::Socket> {
    use anyhow::Context;
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let deadline = std::time::Instant::now() + wait;
    let mut strangers = 0u32;
    loop {
        match listener.accept() {
            Ok((sock, peer)) => {
                if expected.is_some_and(|e| peer.as_socket() != Some(e)) {
                    continue; // not our sender
                }
                sock.set_nonblocking(false)
                    .context("cannot make the connection blocking")?;
                if let Some(token) = token {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if !opens_with(&sock, token, left.max(Duration::from_millis(1))) {
                        // Not the peer: dropped, and the wait goes on.
                        strangers += 1;
                        continue;
                    }
                }
                return Ok(sock);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if crate::interrupt::requested() {
                    anyhow::bail!("interrupted while waiting for a connection on {what}");
                }
                if std::time::Instant::now() > deadline {
                    if strangers > 0 {
                        anyhow::bail!(
                            "no data connection with this run's token arrived on {what} within {:.1} s \
                             ({strangers} without it were dropped: another program connected to the test's port?)",
                            wait.as_secs_f64()
                        );
                    }
                    anyhow::bail!(
                        "no connection from the sender arrived on {what} within {:.1} s: check that --connect \
                         leads to this listener",
                        wait.as_secs_f64()
                    );
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot accept a connection on {what}"))
            }
        }
    }
}

/// Whether `sock` sends exactly `token` first, within `wait` (one record of a
/// seqpacket socket; the first bytes of a stream). The bytes are only looked at
/// (`MSG_PEEK`): the run reads and checks them again as before.
fn opens_with(sock: &socket2::Socket, token: &[u8], wait: Duration) -> bool {
    let until = std::time::Instant::now() + wait;
    let mut got = vec![0u8; token.len()];
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        let peeked = nix::sys::socket::recv(
            std::os::fd::AsRawFd::as_raw_fd(sock),
            &mut got,
            nix::sys::socket::MsgFlags::MSG_PEEK,
        );
        match peeked {
            Ok(0) | Err(_) => return false,
            Ok(n) if n >= token.len() => break,
            // Part of it so far (it comes in one write: rare); look again shortly.
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    sock.set_read_timeout(None).is_ok() && crate::vocab::same_token(&got, token)
}

/// Apply the requested socket buffer sizes to a socket (before connect/listen, so TCP's
/// window scale reflects them).
pub(crate) fn apply_buffers(sock: &socket2::Socket, opts: &TransportOptions) -> io::Result<()> {
    if let Some(n) = opts.sndbuf {
        sock.set_send_buffer_size(n)?;
    }
    if let Some(n) = opts.rcvbuf {
        sock.set_recv_buffer_size(n)?;
    }
    Ok(())
}

/// Read back the buffers the kernel granted.
pub(crate) fn granted_buffers(sender: &socket2::Socket, receiver: &socket2::Socket) -> LinkInfo {
    LinkInfo {
        sndbuf_bytes: sender.send_buffer_size().ok().map(|n| n as u64),
        rcvbuf_bytes: receiver.recv_buffer_size().ok().map(|n| n as u64),
        ..LinkInfo::default()
    }
}

/// The name of a socket file or FIFO: `sb<pid>-<stem>-<id><suffix>`. The process id lets
/// a later run tell a name left by a killed sockbench from one in use (see
/// [`remove_stale`]).
pub fn file_name(stem: &str, id: usize, suffix: &str) -> String {
    format!("sb{}-{stem}-{id}{suffix}", std::process::id())
}

/// The process id in a name this module or the runner made (`sb<pid>-...` files,
/// `sockbench-<pid>-XXXXXX` run directories), if it is one.
pub fn owner_pid(name: &str) -> Option<i32> {
    let rest = name
        .strip_prefix("sockbench-")
        .or_else(|| name.strip_prefix("sb"))?;
    let (pid, tail) = rest.split_once('-')?;
    if tail.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let known = ["unix-", "dgram-", "seqpacket-", "fifo-", "connect-"];
    let ours = if name.starts_with("sockbench-") {
        tail.len() == 6 // tempfile's random part
    } else {
        known.iter().any(|k| tail.starts_with(k))
    };
    ours.then(|| pid.parse().ok()).flatten()
}

/// How close this process is to its descriptor limit: `(open, RLIMIT_NOFILE soft)`,
/// `None` if either cannot be read. EMFILE means both "out of descriptors" and "over
/// RLIMIT_MSGQUEUE"; this tells them apart.
pub fn descriptors() -> Option<(u64, u64)> {
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let (soft, _) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok()?;
    Some((open, soft))
}

/// Whether this process is within a few descriptors of its limit (true if unknown).
pub fn at_descriptor_limit() -> bool {
    match descriptors() {
        Some((open, soft)) => open + 8 >= soft,
        None => true,
    }
}

/// Whether process `pid` is gone.
fn dead(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH)
}

/// The process id in the name of a message queue or shared-memory ring this crate made
/// (`sockbench-<pid>-<id>`, as listed in /dev/mqueue or /dev/shm).
fn ipc_owner_pid(name: &str) -> Option<i32> {
    let (pid, id) = name.strip_prefix("sockbench-")?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(id))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Remove the message queues and shared-memory rings a killed sockbench left (those whose
/// owner process is gone), returning one line per removal. Rings are found in /dev/shm;
/// queues in /dev/mqueue, or, where the mqueue file system is not mounted there, through
/// a mount of it private to one thread (needs CAP_SYS_ADMIN; see [`mq_names`]): the
/// kernel offers no other way to list them.
pub fn remove_stale_ipc() -> Vec<String> {
    let mut removed = Vec::new();
    for (dir, what) in [
        ("/dev/shm", "shared-memory ring"),
        ("/dev/mqueue", "message queue"),
    ] {
        let names: Vec<String> = if what == "message queue" {
            mq_names()
        } else {
            match std::fs::read_dir(dir) {
                Ok(entries) => entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect(),
                Err(_) => continue,
            }
        };
        for name in names {
            let Some(pid) = ipc_owner_pid(&name).filter(|&p| dead(p)) else {
                continue;
            };
            let Ok(cname) = std::ffi::CString::new(format!("/{name}")) else {
                continue;
            };
            let gone = if what == "message queue" {
                nix::mqueue::mq_unlink(cname.as_c_str())
            } else {
                nix::sys::mman::shm_unlink(cname.as_c_str())
            };
            if gone.is_ok() {
                removed.push(format!(
                    "removed {what} {dir}/{name} left by sockbench process {pid}, which is no longer running"
                ));
            }
        }
    }
    removed
}

/// The names of this IPC namespace's message queues: /dev/mqueue's entries where the
/// mqueue file system is mounted there, else those of a mount of it that only one
/// short-lived thread sees (its own mount namespace, gone with the thread). Empty when
/// neither can be read (without CAP_SYS_ADMIN on a machine that does not mount it).
pub fn mq_names() -> Vec<String> {
    let list = |dir: &std::path::Path| -> Option<Vec<String>> {
        Some(
            std::fs::read_dir(dir)
                .ok()?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
        )
    };
    let dev = std::path::Path::new("/dev/mqueue");
    if is_mqueue_fs(dev) {
        return list(dev).unwrap_or_default();
    }
    std::thread::Builder::new()
        .name("sb-mq-list".into())
        .spawn(move || -> Option<Vec<String>> {
            use nix::mount::{mount, umount2, MntFlags, MsFlags};
            // This thread's own mount namespace (and file system context): what it
            // mounts no other thread or process sees, and it goes when the thread ends.
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).ok()?;
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .ok()?;
            // Any existing directory serves as the mount point: the mount hides it only
            // here.
            let at = std::env::temp_dir();
            mount(
                Some("mqueue"),
                &at,
                Some("mqueue"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                None::<&str>,
            )
            .ok()?;
            let names = list(&at);
            let _ = umount2(&at, MntFlags::MNT_DETACH);
            names
        })
        .ok()
        .and_then(|t| t.join().ok().flatten())
        .unwrap_or_default()
}

/// Whether `dir` is a mount of the mqueue file system.
fn is_mqueue_fs(dir: &std::path::Path) -> bool {
    // linux/magic.h's MQUEUE_MAGIC.
    let mqueue = nix::sys::statfs::FsType(0x1980_0202);
    nix::sys::statfs::statfs(dir).is_ok_and(|s| s.filesystem_type() == mqueue)
}

/// Remove what a killed sockbench left in `dir` (socket files, FIFOs and run directories
/// whose owner process is gone), returning one line per removal for the report.
pub fn remove_stale(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name).filter(|&p| dead(p)) else {
            continue;
        };
        let path = e.path();
        let gone = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            Ok(t) if t.is_symlink() || t.is_file() => continue, // never made by us
            _ => std::fs::remove_file(&path),
        };
        if gone.is_ok() {
            removed.push(format!(
                "removed {} left by sockbench process {pid}, which is no longer running",
                path.display()
            ));
        }
    }
    removed
}

/// Connect `sock` to `addr` within `timeout`, noticing Ctrl-C within 10 ms. The socket is
/// blocking again afterwards.
///
/// # Errors
/// As `connect(2)`; `TimedOut` after `timeout`; `Interrupted` on Ctrl-C.
pub(crate) fn connect_with_deadline(
    sock: &socket2::Socket,
    addr: &socket2::SockAddr,
    timeout: Duration,
) -> io::Result<()> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    const SLICE: Duration = Duration::from_millis(10);
    let deadline = std::time::Instant::now() + timeout;
    sock.set_nonblocking(true)?;
    let give_up = |what: &str| -> io::Result<()> {
        if crate::interrupt::requested() {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("interrupted while {what}"),
            ));
        }
        if std::time::Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {} s while {what}", timeout.as_secs()),
            ));
        }
        Ok(())
    };
    let result = loop {
        match sock.connect(addr) {
            Ok(()) => break Ok(()),
            // A Unix listener whose backlog is full: try again shortly.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if let Err(e) = give_up("waiting for room in the listener's backlog") {
                    break Err(e);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::EINPROGRESS) => {
                break loop {
                    let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLOUT)];
                    match poll(&mut fds, PollTimeout::from(SLICE.as_millis() as u16)) {
                        Ok(0) | Err(nix::errno::Errno::EINTR) => {
                            if let Err(e) = give_up("connecting") {
                                break Err(e);
                            }
                        }
                        Ok(_) => {
                            break match sock.take_error() {
                                Ok(Some(e)) | Err(e) => Err(e),
                                Ok(None) => Ok(()),
                            }
                        }
                        Err(e) => break Err(e.into()),
                    }
                };
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    sock.set_nonblocking(false)?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a mount of the mqueue file system is one: another file system, or a path
    /// that is not there, is not (so a machine without /dev/mqueue lists its queues
    /// through a private mount instead); a private mount of it is, where one can be made.
    #[test]
    fn only_an_mqueue_mount_is_taken_for_one() {
        assert!(!is_mqueue_fs(std::path::Path::new("/proc")));
        assert!(!is_mqueue_fs(std::path::Path::new("/")));
        assert!(!is_mqueue_fs(std::path::Path::new("/no/such/dir")));
        // In a thread of its own mount namespace (as mq_names makes one): root only.
        let mounted = std::thread::spawn(|| {
            use nix::mount::{mount, MsFlags};
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).ok()?;
            let none = None::<&str>;
            mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none).ok()?;
            let at = tempfile::tempdir().ok()?;
            mount(
                Some("mqueue"),
                at.path(),
                Some("mqueue"),
                MsFlags::empty(),
                none,
            )
            .ok()?;
            let is = is_mqueue_fs(at.path());
            let _ = nix::mount::umount2(at.path(), nix::mount::MntFlags::MNT_DETACH);
            Some(is)
        })
        .join()
        .unwrap();
        match mounted {
            Some(is) => assert!(is, "a fresh mqueue mount is not taken for one"),
            None => eprintln!("skipped the mounted case: no private mount namespace (not root)"),
        }
    }

    /// A stranger that connects and says nothing is given up on when the wait is over (a
    /// bound on the read), and one that sends the token in pieces is taken.
    #[test]
    fn a_silent_connection_is_given_up_on_at_the_end_of_its_wait() {
        use std::io::Write;
        let token = b"0123456789abcdef".to_vec();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        // opens_with on the next connection, with `wait`, in a thread: its answer and
        // how long it took.
        let look = |wait: Duration| {
            let (sock, _) = l.accept().unwrap();
            let sock = socket2::Socket::from(sock);
            let token = token.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let t = std::time::Instant::now();
                let _ = tx.send((opens_with(&sock, &token, wait), t.elapsed()));
            });
            // Fails here, not by hanging the test, if the wait is not bounded.
            rx.recv_timeout(wait + Duration::from_secs(10))
                .expect("opens_with never returned")
        };
        let _silent = std::net::TcpStream::connect(at).unwrap();
        let (taken, took) = look(Duration::from_millis(200));
        assert!(!taken);
        assert!(took >= Duration::from_millis(150), "{took:?}");
        // The rest of the token comes later: a wait long enough for any scheduler.
        let mut peer = std::net::TcpStream::connect(at).unwrap();
        peer.write_all(&token[..5]).unwrap();
        let rest = token[5..].to_vec();
        let send = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            peer.write_all(&rest).unwrap();
            peer
        });
        assert!(look(Duration::from_secs(10)).0);
        drop(send.join().unwrap());
    }

    #[test]
    fn a_listener_with_a_token_drops_strangers_and_takes_the_peer_that_sends_it() {
        use std::io::{Read, Write};
        let token = b"0123456789abcdef".to_vec();
        let opts = TransportOptions {
            token: Some(token.clone()),
            accept_wait: Some(Duration::from_secs(5)),
            ..TransportOptions::default()
        };
        let l = tcp::listen(false, &opts).unwrap();
        let Endpoint::Address(at) = l.endpoint().clone() else {
            panic!("a TCP listener has an address")
        };
        // A stranger with the wrong bytes, one that says nothing and hangs up, then the
        // peer: the first two are dropped (and see their connection end).
        let mut wrong = std::net::TcpStream::connect(at).unwrap();
        wrong.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        // All it sends: taken for the peer, it would end before the 20 bytes below.
        wrong.shutdown(std::net::Shutdown::Write).unwrap();
        drop(std::net::TcpStream::connect(at).unwrap());
        let mut peer = std::net::TcpStream::connect(at).unwrap();
        peer.write_all(&token).unwrap();
        peer.write_all(b"data").unwrap();
        let (mut conn, _) = l.accept(None).unwrap();
        // The token is still there for the run to read and check; then the data.
        let mut got = [0u8; 20];
        let mut n = 0;
        while n < 20 {
            let k = conn.recv(&mut got[n..]).unwrap();
            assert!(k > 0, "the connection ended after {:?}", &got[..n]);
            n += k;
        }
        assert_eq!(&got[..16], &token[..]);
        assert_eq!(&got[16..], b"data");
        wrong
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut b = [0u8; 1];
        assert!(
            matches!(wrong.read(&mut b), Ok(0) | Err(_)),
            "the stranger was dropped"
        );
    }

    #[test]
    fn only_names_this_tool_makes_carry_an_owner() {
        assert_eq!(owner_pid("sb123-unix-4.sock"), Some(123));
        assert_eq!(owner_pid("sb77-fifo-4294967296"), Some(77));
        assert_eq!(owner_pid("sockbench-42-AbCdEf"), Some(42));
        for other in [
            "sb123-notes.txt",
            "sockbench-42-toolong",
            "sbx-unix-1.sock",
            "sockbench-test-1",
            "unix-1.sock",
            "sb-unix-1.sock",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }

    #[test]
    fn only_queues_and_rings_this_tool_makes_carry_an_owner() {
        assert_eq!(ipc_owner_pid("sockbench-123-0"), Some(123));
        assert_eq!(ipc_owner_pid("sockbench-9-17"), Some(9));
        for other in [
            "sockbench-test-123",
            "sockbench-test2-123",
            "sockbench-12-AbCdEf",
            "sockbench-12-",
            "sockbench--1",
            "sb123-unix-0",
            "pulse-shm-123",
        ] {
            assert_eq!(ipc_owner_pid(other), None, "{other}");
        }
    }

    #[test]
    fn bind_failures_name_their_cause() {
        let e = io::Error::from_raw_os_error(nix::libc::EACCES);
        let h = unix::bind_hint(&e, std::path::Path::new("/srv/x.sock"));
        assert!(h.contains("permission denied in /srv"), "{h}");
        assert!(!h.contains("remove"), "{h}");
        let h = unix::bind_hint(
            &io::Error::from_raw_os_error(nix::libc::EROFS),
            std::path::Path::new("/mnt/ro/x.sock"),
        );
        assert!(h.contains("/mnt/ro is on a read-only file system"), "{h}");
        for full in [nix::libc::ENOSPC, nix::libc::EDQUOT] {
            let h = unix::bind_hint(
                &io::Error::from_raw_os_error(full),
                std::path::Path::new("/var/x.sock"),
            );
            assert!(h.contains("no space left in /var"), "{h}");
        }
        let in_use = io::Error::from(io::ErrorKind::AddrInUse);
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let m = tcp::bind_error("TCP", any, &in_use);
        assert!(
            m.contains("no free local port") && m.contains("ip_local_port_range"),
            "{m}"
        );
        let fixed: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        assert!(tcp::bind_error("TCP", fixed, &in_use)
            .contains("port 5201 on 127.0.0.1 is already in use"));
    }

    #[test]
    fn a_connect_that_nobody_answers_gives_up_at_its_deadline() {
        // A listener with a full backlog that never accepts: the next connect waits.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let l = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
        l.bind(&socket2::SockAddr::unix(&path).unwrap()).unwrap();
        l.listen(0).unwrap();
        let mut held = Vec::new();
        let t = std::time::Instant::now();
        let err = loop {
            let s =
                socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
            match connect_with_deadline(
                &s,
                &socket2::SockAddr::unix(&path).unwrap(),
                Duration::from_millis(300),
            ) {
                Ok(()) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 10, "the backlog never filled");
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(t.elapsed() >= Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(3));
    }

    /// Listen, publish the endpoint as JSON, connect from another thread with only that
    /// JSON, accept, and move `msg` from the sender to the receiver (and back on duplex
    /// transports). Returns the endpoint.
    fn through_halves(kind: TransportKind, dir: &std::path::Path) -> Endpoint {
        let opts = TransportOptions {
            dir: dir.to_path_buf(),
            message_bytes: 64,
            ..TransportOptions::default()
        };
        let listener = listen(kind, &opts, 7).unwrap();
        let published = serde_json::to_string(listener.endpoint()).unwrap();
        let peer_opts = opts.clone();
        let connected = std::thread::spawn(move || {
            let endpoint: Endpoint = serde_json::from_str(&published).unwrap();
            connect(kind, &endpoint, &peer_opts).unwrap()
        })
        .join()
        .unwrap();
        let endpoint = listener.endpoint().clone();
        let (mut receiver, info) = listener.accept(connected.local.as_ref()).unwrap();
        let mut sender = connected.conn;
        let msg = [0x5Au8; 64];
        let mut buf = [0u8; 64];
        assert_eq!(sender.send(&msg).unwrap(), 64, "{kind}");
        let mut got = 0;
        while got < 64 {
            got += receiver.recv(&mut buf[got..]).unwrap();
        }
        assert_eq!(buf, msg, "{kind}");
        let tcp = matches!(kind, TransportKind::Tcp | TransportKind::Tcp6);
        assert_eq!(
            sender.mss().is_some(),
            tcp,
            "{kind}: only TCP has a segment size"
        );
        if kind.is_socket() {
            assert_eq!(receiver.send(&msg[..8]).unwrap(), 8, "{kind} answers");
            assert_eq!(sender.recv(&mut buf).unwrap(), 8, "{kind}");
            assert!(info.rcvbuf_bytes.is_some(), "{kind}");
            // The answering end can end its data too: a datagram socket with an empty
            // message (and may go on sending), a stream by shutting down its side.
            receiver.finish().unwrap();
            assert_eq!(sender.recv(&mut buf).unwrap(), 0, "{kind}: the end");
            let again = receiver.send(&msg[..8]);
            match kind {
                TransportKind::UnixDgram => assert!(again.is_ok(), "{kind}"),
                TransportKind::Unix | TransportKind::UnixSeqpacket | TransportKind::Tcp => {
                    assert!(again.is_err(), "{kind}: shut down")
                }
                _ => {}
            }
        } else {
            assert!(
                info.sndbuf_bytes.is_some(),
                "{kind}: its buffer is reported"
            );
        }
        match kind {
            // One pipe, one ring: the same buffer on both sides.
            TransportKind::Fifo | TransportKind::Shm => {
                assert_eq!(info.rcvbuf_bytes, info.sndbuf_bytes, "{kind}")
            }
            // A queue of fs.mqueue.msg_max messages of the message size.
            TransportKind::Mq => assert_eq!(
                info.sndbuf_bytes,
                Some(mq::depth(&opts) as u64 * 64),
                "{kind}"
            ),
            _ => {}
        }
        // Names carry this process's id, so a later run can tell a killed run's leftovers.
        if let Endpoint::Path(p) = &endpoint {
            let name = p.file_name().unwrap().to_string_lossy();
            assert_eq!(owner_pid(&name), Some(std::process::id() as i32), "{name}");
        }
        endpoint
    }

    #[test]
    fn every_named_transport_listens_and_connects_apart_through_a_published_endpoint() {
        for kind in TransportKind::ALL {
            if matches!(kind, TransportKind::Socketpair | TransportKind::Pipe) {
                continue;
            }
            if kind.is_ipv6() && std::net::TcpListener::bind("[::1]:0").is_err() {
                continue; // no IPv6 loopback here
            }
            let dir = tempfile::tempdir().unwrap();
            let endpoint = through_halves(kind, dir.path());
            // Every name made on the way is gone once both ends are open.
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert!(left.is_empty(), "{kind} left {left:?}");
            if let Endpoint::Name(n) = &endpoint {
                if kind == TransportKind::Shm {
                    assert!(
                        !std::path::Path::new(&format!("/dev/shm{n}")).exists(),
                        "{n}"
                    );
                }
            }
            match (kind.is_ip(), kind.uses_path(), &endpoint) {
                (true, _, Endpoint::Address(a)) => assert_ne!(a.port(), 0),
                (_, true, Endpoint::Path(p)) => assert!(p.starts_with(dir.path())),
                (false, false, Endpoint::Name(n)) => assert!(n.starts_with("/sockbench-")),
                other => panic!("{kind}: unexpected endpoint {other:?}"),
            }
        }
    }

    #[test]
    fn anonymous_transports_say_they_have_no_halves() {
        let opts = TransportOptions::default();
        for kind in [TransportKind::Socketpair, TransportKind::Pipe] {
            let e = listen(kind, &opts, 0).err().unwrap().to_string();
            assert!(e.contains("no name") && e.contains("inheritance"), "{e}");
            let at = Endpoint::Name("/x".into());
            assert!(connect(kind, &at, &opts).is_err());
        }
        let e = connect(TransportKind::Tcp, &Endpoint::Name("/x".into()), &opts)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not an endpoint of tcp"), "{e}");
    }

    #[test]
    fn an_endpoint_reads_as_the_report_names_it() {
        let a: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        assert_eq!(Endpoint::Address(a).to_string(), "127.0.0.1:5201");
        assert_eq!(
            Endpoint::Path("/run/x.sock".into()).to_string(),
            "/run/x.sock"
        );
        assert_eq!(
            Endpoint::Name("/sockbench-1-2".into()).to_string(),
            "/sockbench-1-2"
        );
        let json = serde_json::to_string(&Endpoint::Address(a)).unwrap();
        assert_eq!(json, r#"{"address":"127.0.0.1:5201"}"#);
    }

    #[test]
    fn each_transport_names_the_limit_on_its_messages() {
        let sys = SystemLimits {
            wmem_max: 4 << 20,
            wmem_default: 212_992,
            mq_msgsize_max: 8192,
            cap_sys_resource: false,
        };
        assert_eq!(
            TransportKind::Tcp.max_message(None, &sys),
            None,
            "a byte stream"
        );
        let (udp, why) = TransportKind::Udp.max_message(None, &sys).unwrap();
        assert_eq!(udp, 65_507);
        assert!(why.contains("IP packet limit"), "{why}");
        assert_eq!(
            TransportKind::Udp6.max_message(None, &sys).unwrap().0,
            65_527
        );
        let (dgram, why) = TransportKind::UnixDgram.max_message(None, &sys).unwrap();
        assert_eq!(dgram, 212_992 - 32);
        assert!(why.contains("net.core.wmem_default = 212992"), "{why}");
        // SO_SNDBUF is doubled, and capped by wmem_max.
        let asked = TransportKind::UnixSeqpacket
            .max_message(Some(1 << 20), &sys)
            .unwrap();
        assert_eq!(asked.0, (2 << 20) - 32);
        assert!(
            asked
                .1
                .contains("--sndbuf 1048576 gives a send buffer of 2097152 bytes"),
            "{}",
            asked.1
        );
        let capped = TransportKind::UnixDgram
            .max_message(Some(64 << 20), &sys)
            .unwrap();
        assert_eq!(capped.0, (8 << 20) - 32);
        assert!(
            capped
                .1
                .contains("net.core.wmem_max = 4194304 caps --sndbuf"),
            "{}",
            capped.1
        );
        let (mq, why) = TransportKind::Mq.max_message(None, &sys).unwrap();
        assert_eq!(mq, 8192);
        assert!(why.contains("fs.mqueue.msgsize_max"), "{why}");
        let root = SystemLimits {
            cap_sys_resource: true,
            ..sys
        };
        assert_eq!(
            TransportKind::Mq.max_message(None, &root).unwrap().0,
            16 << 20
        );
        assert_eq!(TransportKind::Udp.default_stream_size(), 1472);
        assert_eq!(TransportKind::Mq.default_stream_size(), 8192);
        assert_eq!(TransportKind::Unix.default_stream_size(), 65_536);
    }

    #[test]
    fn a_datagram_listener_needs_its_senders_name_to_answer() {
        let dir = tempfile::tempdir().unwrap();
        let opts = TransportOptions {
            dir: dir.path().to_path_buf(),
            ..TransportOptions::default()
        };
        let listener = listen(TransportKind::UnixDgram, &opts, 1).unwrap();
        let e = listener.accept(None).err().unwrap().to_string();
        assert!(e.contains("answers its sender's own socket file"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

//! `sockbench listen`: a socket anyone can `nc` into that logs what arrives, read by read.
//!
//! One thread and one `mio::Poll` (epoll) serve every connection: the listening socket,
//! each accepted connection, or the one datagram socket. Every event is one line on
//! stdout, as text or as one JSON object; what a peer sent is only ever printed escaped.
//! Ctrl-C (or `--duration`) ends it with a summary per connection, and the socket file
//! is removed.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde::Serialize;
use serde_json::json;
use socket2::{Domain, SockAddr, Socket, Type};

use crate::cli::ListenArgs;
use crate::document::listen::{ListenBody, ListenReport, PeerSummary};
use crate::error::{CommandResult, Error, Outcome, PlanError};
use crate::report::grid::Grid;
use crate::report::openmetrics::Family;
use crate::report::output::{self, Head, Records, Rendered};
use crate::report::{Envelope, Kind, Written};
use crate::transport::RunDir;
use crate::transport::TransportKind;
use crate::vocab::units::{format_bytes, parse_size, utc_micros};
use crate::vocab::Format;
use crate::vocab::View;

/// The transports `listen` takes.
pub const TRANSPORTS: [TransportKind; 7] = [
    TransportKind::Unix,
    TransportKind::UnixDgram,
    TransportKind::UnixSeqpacket,
    TransportKind::Tcp,
    TransportKind::Tcp6,
    TransportKind::Udp,
    TransportKind::Udp6,
];

/// Largest `--read-size`.
const MAX_READ: u64 = 64 << 20;
/// Bytes waiting to be echoed to one connection before it is read no further.
const ECHO_BACKLOG: usize = 4 << 20;
/// The listener's token; connections count from 1.
const LISTENER: Token = Token(0);

/// What `listen` was asked to do, checked.
#[derive(Debug)]
struct Setup {
    transport: TransportKind,
    addr: Option<SocketAddr>,
    path: Option<PathBuf>,
    read_size: usize,
    rcvbuf: Option<usize>,
    echo: bool,
    duration: Option<Duration>,
    verbose: u8,
    json: bool,
    /// The log goes to stderr (stdout holds the summary in another format).
    log_to_stderr: bool,
}

/// Check the flags.
fn setup(args: &ListenArgs, format: Format) -> Result<Setup, PlanError> {
    let names: Vec<&str> = TRANSPORTS.iter().map(|t| t.name()).collect();
    let asked = args.transports.transport.as_deref().unwrap_or("tcp");
    let transport = TRANSPORTS
        .into_iter()
        .find(|t| t.name() == asked.trim())
        .ok_or_else(|| {
            format!(
                "listen cannot use transport '{}': use one of {}",
                asked,
                names.join(", ")
            )
        })?;
    // The log is JSON Lines under --format json, else text: on stdout under the table,
    // on stderr under a format of a whole document (the summary then holds stdout).
    let stream = crate::report::log_stream(format);
    let json = stream == crate::report::LogStream::JsonLines;
    let log_to_stderr = stream == crate::report::LogStream::Stderr;
    let read_size = parse_size(&args.read_size).map_err(|e| format!("--read-size: {e}"))?;
    if read_size == 0 || read_size > MAX_READ {
        return Err(format!(
            "--read-size must be between 1 byte and {}",
            format_bytes(MAX_READ)
        )
        .into());
    }
    let rcvbuf = match &args.rcvbuf {
        None => None,
        Some(t) => {
            let n = parse_size(t).map_err(|e| format!("--rcvbuf: {e}"))?;
            if n == 0 || n > crate::scenario::MAX_BUFFER {
                return Err(format!(
                    "--rcvbuf must be between 1 byte and {}",
                    format_bytes(crate::scenario::MAX_BUFFER)
                )
                .into());
            }
            Some(n as usize)
        }
    };
    let duration = args.duration.parsed()?;
    let (addr, path) = if transport.is_ip() {
        if args.path.is_some() {
            return Err(format!(
                "--path is for Unix sockets; {transport} listens on --listen and --port"
            )
            .into());
        }
        let ip = match &args.listen {
            Some(a) => a
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .map_err(|_| format!("invalid --listen '{a}': give an IP address, e.g. 0.0.0.0"))?,
            None if transport.is_ipv6() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            None => IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        if ip.is_ipv6() != transport.is_ipv6() {
            return Err(format!("--listen {ip} is of the other IP family than {transport}").into());
        }
        (Some(SocketAddr::new(ip, args.port)), None)
    } else {
        if args.listen.is_some() {
            return Err(
                format!("--listen is for IP transports; {transport} listens on --path").into(),
            );
        }
        if let Some(p) = &args.path {
            let len = p.as_os_str().len();
            if len > crate::transport::UNIX_PATH_MAX {
                return Err(format!(
                    "--path {} is {len} bytes; a Unix socket path holds at most {} (choose a shorter one)",
                    p.display(),
                    crate::transport::UNIX_PATH_MAX
                ).into());
            }
        }
        (None, args.path.clone())
    };
    Ok(Setup {
        transport,
        addr,
        path,
        read_size: read_size as usize,
        rcvbuf,
        echo: args.echo,
        duration,
        verbose: args.verbose,
        json,
        log_to_stderr,
    })
}

/// Run `sockbench listen`.
///
/// # Errors
/// A usage error, or a socket that cannot be opened.
pub fn run(args: &ListenArgs, argv: Vec<String>) -> CommandResult {
    let output = &args.output;
    let setup = setup(args, output.format)?;
    let exports = super::exports(output)?;
    super::catch_interrupts()?;
    match serve(&setup, Envelope::starting(argv)) {
        Ok((report, mut log)) => {
            if setup.json {
                // The last line of the JSON log: the summary document, as one event.
                summary_event(&mut log, &report);
                exports.finish(&report);
                let view = exports.view();
                let printed = super::print_stdout_exports(&report, Format::Json, view, &exports);
                return Ok(Outcome::done().and_errors(super::unwritten(printed, &exports)));
            }
            exports.finish(&report);
            Ok(Outcome::done().and_errors(super::emit(&report, output, &exports)))
        }
        Err(e) => Err(Error::failed(format!("{e:#}"))),
    }
}

/// Bytes as text no terminal will interpret ([`crate::vocab::text::bytes`]): printable ASCII
/// as it is, `\n` `\r` `\t`, `\\` and `\"`, anything else as `\xNN`.
pub use crate::vocab::text::bytes as escape;

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
enum End {
    /// The peer closed its end (a read returned 0).
    Eof,
    /// The peer reset the connection.
    Reset,
    /// Any other error.
    Error(String),
}

impl End {
    fn of(e: &io::Error) -> End {
        match e.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => End::Reset,
            _ => End::Error(e.to_string()),
        }
    }

    fn name(&self) -> String {
        match self {
            End::Eof => "eof".into(),
            End::Reset => "reset".into(),
            End::Error(e) => format!("error: {e}"),
        }
    }
}

/// One peer's counts: a connection, or a datagram sender.
#[derive(Clone, Debug)]
struct Peer {
    id: usize,
    from: String,
    opened: Instant,
    closed: Option<Instant>,
    bytes: u64,
    reads: u64,
}

impl Peer {
    fn new(id: usize, from: String) -> Peer {
        Peer {
            id,
            from,
            opened: Instant::now(),
            closed: None,
            bytes: 0,
            reads: 0,
        }
    }

    /// From accept (or the first datagram) to close (or now).
    fn duration(&self, now: Instant) -> Duration {
        self.closed.unwrap_or(now).duration_since(self.opened)
    }

    fn bits_per_second(&self, now: Instant) -> f64 {
        let secs = self.duration(now).as_secs_f64();
        if secs > 0.0 {
            self.bytes as f64 * 8.0 / secs
        } else {
            0.0
        }
    }
}

/// Writes the log: one line per event, text or JSON, to stdout (or stderr, when stdout
/// holds the summary in a format of its own).
struct Log {
    started: Instant,
    json: bool,
    verbose: u8,
    to_stderr: bool,
}

impl Log {
    /// One event at `level` or above: `text` for people, `fields` (plus the times) for
    /// programs.
    fn event(&mut self, level: u8, text: &str, fields: serde_json::Value) {
        if self.verbose < level {
            return;
        }
        let mono = self.started.elapsed().as_secs_f64();
        let wall = utc_micros(SystemTime::now());
        let line = if self.json {
            let mut v = fields;
            if let Some(o) = v.as_object_mut() {
                o.insert("mono_s".into(), json!(mono));
                o.insert("wall".into(), json!(wall));
            }
            v.to_string()
        } else {
            format!("{wall} {mono:12.6} {text}")
        };
        if self.to_stderr {
            let mut err = io::stderr().lock();
            let _ = writeln!(err, "{line}");
        } else {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }

    /// A read: its size, and from -v 2 its bytes escaped (from -v 3 also in hex).
    fn read(&mut self, id: usize, from: Option<&str>, data: &[u8]) {
        if self.verbose < 1 {
            return;
        }
        let mut text = format!(
            "#{id} read {}",
            crate::report::output::counted(data.len(), "byte")
        );
        let mut fields = json!({"event": "read", "id": id, "bytes": data.len()});
        if let Some(f) = from {
            text.push_str(&format!(" from {f}"));
            fields["peer"] = json!(f);
        }
        if self.verbose >= 2 {
            let e = escape(data);
            text.push_str(&format!(" \"{e}\""));
            fields["data"] = json!(e);
        }
        if self.verbose >= 3 {
            let h = hex::encode(data);
            text.push_str(&format!(" hex {h}"));
            fields["hex"] = json!(h);
        }
        self.event(1, &text, fields);
    }
}

/// The listening socket's name, removed on drop when it is a file.
struct Bound {
    socket: Socket,
    shown: String,
    connect: String,
    file: Option<PathBuf>,
    _dir: Option<RunDir>,
}

impl Drop for Bound {
    fn drop(&mut self) {
        if let Some(f) = &self.file {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Make, bind and (for streams) listen on the socket.
fn bind(setup: &Setup) -> anyhow::Result<Bound> {
    let t = setup.transport;
    let ty = if t.reliable() && t.is_ip() || t == TransportKind::Unix {
        Type::STREAM
    } else if t == TransportKind::UnixSeqpacket {
        Type::SEQPACKET
    } else {
        Type::DGRAM
    };
    let (domain, addr, dir, file) = if let Some(a) = setup.addr {
        (Domain::for_address(a), SockAddr::from(a), None, None)
    } else {
        let (dir, file) = match &setup.path {
            Some(p) => (None, p.clone()),
            None => {
                let dir = RunDir::open(None)?;
                let file = dir.path().join("listen.sock");
                (Some(dir), file)
            }
        };
        if file.symlink_metadata().is_ok() {
            bail!(
                "{} already exists: remove it, or choose another --path",
                file.display()
            );
        }
        let addr = SockAddr::unix(&file)
            .with_context(|| format!("cannot use {} as a socket path", file.display()))?;
        (Domain::UNIX, addr, dir, Some(file))
    };
    let socket = Socket::new(domain, ty, None).context("cannot create the socket")?;
    if setup.addr.is_some() && ty == Type::STREAM {
        socket.set_reuse_address(true)?;
    }
    if domain == Domain::IPV6 {
        let _ = socket.set_only_v6(true);
    }
    if let Some(n) = setup.rcvbuf {
        socket
            .set_recv_buffer_size(n)
            .context("cannot set SO_RCVBUF")?;
    }
    socket.bind(&addr).map_err(|e| match (e.kind(), setup.addr) {
        (io::ErrorKind::AddrInUse, Some(a)) => anyhow::anyhow!(
            "cannot listen on {a}: the port is in use (stop what holds it, or use --port 0 for a free one)"
        ),
        (io::ErrorKind::PermissionDenied, Some(a)) => anyhow::anyhow!(
            "cannot listen on {a}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
        ),
        (io::ErrorKind::AddrNotAvailable, Some(a)) => anyhow::anyhow!(
            "cannot listen on {a}: no such address on this host"
        ),
        _ => anyhow::Error::new(e).context(format!(
            "cannot bind {}",
            file.as_deref().map_or_else(String::new, |f| f.display().to_string())
        )),
    })?;
    // From here the file is ours to remove.
    let mut bound = Bound {
        socket,
        shown: String::new(),
        connect: String::new(),
        file,
        _dir: dir,
    };
    if ty != Type::DGRAM {
        bound.socket.listen(1024).context("cannot listen")?;
    }
    bound.socket.set_nonblocking(true)?;
    let (shown, connect) = match (&bound.file, bound.socket.local_addr()?.as_socket()) {
        (Some(f), _) => {
            let f = f.display().to_string();
            let connect = match t {
                TransportKind::Unix => format!("nc -U {f}"),
                TransportKind::UnixDgram => format!("nc -uU {f}"),
                _ => format!("socat - UNIX-CONNECT:{f},type=5"),
            };
            (f, connect)
        }
        (None, Some(a)) => {
            let host = match a.ip() {
                ip if ip.is_unspecified() && ip.is_ipv6() => IpAddr::V6(Ipv6Addr::LOCALHOST),
                ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                ip => ip,
            };
            let udp = if t.reliable() { "" } else { "-u " };
            (a.to_string(), format!("nc {udp}{host} {}", a.port()))
        }
        (None, None) => bail!("the socket has no address"),
    };
    bound.shown = shown;
    bound.connect = connect;
    Ok(bound)
}

/// A connection: its socket, its counts and what waits to be echoed.
struct Conn {
    socket: Socket,
    peer: Peer,
    pending: Vec<u8>,
}

/// The listener's state: the log, every peer seen, live connections.
struct State<'a> {
    setup: &'a Setup,
    log: Log,
    peers: Vec<Peer>,
    conns: HashMap<Token, Conn>,
    by_addr: HashMap<String, usize>,
    next: usize,
    buf: Vec<u8>,
}

fn serve(setup: &Setup, mut envelope: Envelope) -> anyhow::Result<(ListenReport, Log)> {
    let bound = bind(setup)?;
    let mut poll = Poll::new().context("cannot create an epoll instance")?;
    let fd = bound.socket.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), LISTENER, Interest::READABLE)?;
    let mut st = State {
        setup,
        log: Log {
            started: Instant::now(),
            json: setup.json,
            verbose: setup.verbose,
            to_stderr: setup.log_to_stderr,
        },
        peers: Vec::new(),
        conns: HashMap::new(),
        by_addr: HashMap::new(),
        next: 1,
        buf: vec![0; setup.read_size],
    };
    let granted = bound.socket.recv_buffer_size().ok();
    let mut text = format!(
        "listening on {} {}; connect with: {}",
        setup.transport, bound.shown, bound.connect
    );
    if let (Some(asked), Some(g)) = (setup.rcvbuf, granted) {
        text.push_str(&format!(
            " (rcvbuf {} asked, {} granted)",
            format_bytes(asked as u64),
            format_bytes(g as u64)
        ));
    }
    st.log.event(
        0,
        &text,
        json!({
            "event": "listening",
            "transport": setup.transport,
            "address": bound.shown,
            "connect": bound.connect,
            "read_size": setup.read_size,
            "rcvbuf_bytes": granted,
        }),
    );
    let until = setup.duration.map(|d| Instant::now() + d);
    let mut events = Events::with_capacity(1024);
    let datagram = !setup.transport.reliable() || setup.transport == TransportKind::UnixDgram;
    loop {
        if crate::interrupt::requested() || until.is_some_and(|u| Instant::now() >= u) {
            break;
        }
        // Ctrl-C is seen within 20 ms even when the signal wakes another thread.
        let wait = until.map_or(Duration::from_millis(20), |u| {
            u.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(20))
        });
        match poll.poll(&mut events, Some(wait)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("epoll_wait failed"),
        }
        for ev in &events {
            match ev.token() {
                LISTENER if datagram => st.datagrams(&bound.socket),
                LISTENER => st.accept(&bound.socket, &poll),
                token => {
                    if ev.is_writable() {
                        st.flush(token, &poll);
                    }
                    if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                        st.drain(token, &poll);
                    }
                }
            }
        }
    }
    let now = Instant::now();
    for conn in st.conns.values_mut() {
        conn.peer.closed = Some(now);
    }
    let live: Vec<Peer> = st.conns.drain().map(|(_, c)| c.peer).collect();
    st.peers.extend(live);
    st.peers.sort_by_key(|p| p.id);
    envelope.end();
    let body = ListenBody {
        transport: setup.transport.to_string(),
        address: bound.shown.clone(),
        connections: (st.peers.iter())
            .map(|p| PeerSummary {
                id: p.id as u64,
                peer: p.from.clone(),
                bytes: p.bytes,
                reads: p.reads,
                duration_seconds: p.duration(now).as_secs_f64(),
                bits_per_second: p.bits_per_second(now),
            })
            .collect(),
    };
    drop(bound);
    Ok((ListenReport { envelope, body }, st.log))
}

impl State<'_> {
    /// Take every waiting connection.
    fn accept(&mut self, listener: &Socket, poll: &Poll) {
        loop {
            let (socket, from) = match listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let hint = if e.raw_os_error() == Some(nix::libc::EMFILE) {
                        " (raise the descriptor limit: ulimit -n)"
                    } else {
                        ""
                    };
                    eprintln!("sockbench listen: accept failed: {e}{hint}");
                    return;
                }
            };
            let id = self.next;
            self.next += 1;
            let from = peer_name(&from);
            if let Err(e) = socket.set_nonblocking(true) {
                eprintln!("sockbench listen: #{id}: {e}");
                continue;
            }
            let token = Token(id);
            let fd: RawFd = socket.as_raw_fd();
            if let Err(e) = poll.registry().register(
                &mut SourceFd(&fd),
                token,
                Interest::READABLE | Interest::WRITABLE,
            ) {
                eprintln!("sockbench listen: #{id}: cannot watch the connection: {e}");
                continue;
            }
            self.log.event(
                1,
                &format!("#{id} accept from {from}"),
                json!({"event": "accept", "id": id, "peer": from}),
            );
            self.conns.insert(
                token,
                Conn {
                    socket,
                    peer: Peer::new(id, from),
                    pending: Vec::new(),
                },
            );
            // Data that came with the connection is read on its first event.
        }
    }

    /// Read a connection until it would block, logging each read; close it at its end.
    fn drain(&mut self, token: Token, poll: &Poll) {
        let end = loop {
            let Some(conn) = self.conns.get_mut(&token) else {
                return;
            };
            if conn.pending.len() >= ECHO_BACKLOG {
                // Read again once the echo drained (see flush).
                return;
            }
            match nix::sys::socket::recv(
                conn.socket.as_raw_fd(),
                &mut self.buf,
                nix::sys::socket::MsgFlags::empty(),
            ) {
                Ok(0) => break End::Eof,
                Ok(n) => {
                    conn.peer.bytes += n as u64;
                    conn.peer.reads += 1;
                    let id = conn.peer.id;
                    if self.setup.echo {
                        conn.pending.extend_from_slice(&self.buf[..n]);
                    }
                    self.log.read(id, None, &self.buf[..n]);
                    if self.setup.echo {
                        self.flush(token, poll);
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => return,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => break End::of(&io::Error::from(e)),
            }
        };
        self.close(token, poll, end);
    }

    /// Write what waits to be echoed, as far as the socket takes it.
    fn flush(&mut self, token: Token, poll: &Poll) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        let was_full = conn.pending.len() >= ECHO_BACKLOG;
        while !conn.pending.is_empty() {
            match nix::sys::socket::send(
                conn.socket.as_raw_fd(),
                &conn.pending,
                nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            ) {
                Ok(n) => {
                    conn.pending.drain(..n);
                }
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    // The peer went away; its reads will say how.
                    let _ = e;
                    conn.pending.clear();
                }
            }
        }
        if was_full && conn.pending.len() < ECHO_BACKLOG {
            self.drain(token, poll);
        }
    }

    fn close(&mut self, token: Token, poll: &Poll, end: End) {
        let Some(mut conn) = self.conns.remove(&token) else {
            return;
        };
        let fd = conn.socket.as_raw_fd();
        let _ = poll.registry().deregister(&mut SourceFd(&fd));
        conn.peer.closed = Some(Instant::now());
        let p = &conn.peer;
        self.log.event(
            1,
            &format!(
                "#{} close: {} ({} in {} over {:.6} s)",
                p.id,
                match &end {
                    End::Eof => "end of file".to_string(),
                    End::Reset => "reset by the peer".to_string(),
                    End::Error(e) => format!("error: {e}"),
                },
                crate::report::output::counted(p.bytes as usize, "byte"),
                crate::report::output::counted(p.reads as usize, "read"),
                p.duration(Instant::now()).as_secs_f64()
            ),
            json!({
                "event": "close",
                "id": p.id,
                "reason": end.name(),
                "bytes": p.bytes,
                "reads": p.reads,
            }),
        );
        self.peers.push(conn.peer);
    }

    /// Read every waiting datagram; a new sender is a new peer.
    fn datagrams(&mut self, socket: &Socket) {
        loop {
            // MSG_TRUNC: the datagram's whole length, even when the read took less.
            let (whole, from) = match socket
                .recv_from_with_flags(crate::sys::as_uninit(&mut self.buf), nix::libc::MSG_TRUNC)
            {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("sockbench listen: receive failed: {e}");
                    return;
                }
            };
            let n = whole.min(self.buf.len());
            let name = peer_name(&from);
            let id = match self.by_addr.get(&name) {
                Some(&i) => i,
                None => {
                    let id = self.next;
                    self.next += 1;
                    self.by_addr.insert(name.clone(), id);
                    self.peers.push(Peer::new(id, name.clone()));
                    self.log.event(
                        1,
                        &format!("#{id} new peer {name}"),
                        json!({"event": "peer", "id": id, "peer": name}),
                    );
                    id
                }
            };
            if n < whole {
                self.log.event(
                    1,
                    &format!("#{id} a datagram of {whole} bytes was cut to the {n} bytes of --read-size"),
                    json!({"event": "truncated", "id": id, "datagram_bytes": whole, "read_bytes": n}),
                );
            }
            if let Some(p) = self.peers.iter_mut().find(|p| p.id == id) {
                p.bytes += n as u64;
                p.reads += 1;
            }
            self.log.read(id, Some(&name), &self.buf[..n]);
            if self.setup.echo {
                let named = from.as_socket().is_some() || from.as_pathname().is_some();
                if !named {
                    eprintln!(
                        "sockbench listen: #{id}: the sender has no address to echo to (bind the client's socket)"
                    );
                } else if let Err(e) = socket.send_to(&self.buf[..n], &from) {
                    eprintln!("sockbench listen: #{id}: echo failed: {e}");
                }
            }
        }
    }
}

/// The peer as the log shows it. A Unix client names its own socket (any bytes it
/// likes), so its path is escaped ([`crate::vocab::text::terminal`]) before it reaches a line.
fn peer_name(a: &SockAddr) -> String {
    match (a.as_socket(), a.as_pathname()) {
        (Some(s), _) => s.to_string(),
        (None, Some(p)) => crate::vocab::text::terminal(&p.to_string_lossy()),
        (None, None) => "(unnamed)".to_string(),
    }
}

/// The summary line of a JSON log: the document, marked as the summary event.
#[derive(Serialize)]
struct SummaryEvent<'a> {
    event: &'static str,
    #[serde(flatten)]
    document: Written<'a, ListenBody>,
}

/// The JSON log's last line: the summary document as the `summary` event.
fn summary_event(log: &mut Log, report: &ListenReport) {
    let event = SummaryEvent {
        event: "summary",
        document: report.document(),
    };
    log.event(0, "", serde_json::to_value(&event).unwrap_or_default());
}

impl Rendered for ListenReport {
    fn head(&self) -> Head<'_> {
        Head::of(Kind::Listen, &self.envelope)
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        output::pretty(&self.document())
    }

    fn tables(&self, view: &View) -> Vec<Grid> {
        let peers = &self.body.connections;
        let rows = (peers.iter())
            .map(|p| {
                vec![
                    format!("#{}", p.id),
                    p.peer.clone(),
                    p.bytes.to_string(),
                    p.reads.to_string(),
                    format!("{:.3} s", p.duration_seconds),
                    crate::vocab::units::throughput(p.bits_per_second, view.units),
                ]
            })
            .collect();
        use crate::report::grid::Align::{Left, Right};
        vec![Grid {
            title: Some(format!(
                "summary: {}",
                crate::report::output::counted(peers.len(), "peer")
            )),
            headers: ["id", "peer", "bytes", "reads", "duration", "throughput"]
                .map(String::from)
                .to_vec(),
            align: vec![Left, Left, Right, Right, Right, Right],
            rows,
            notes: Vec::new(),
        }]
    }

    fn records(&self) -> Records {
        let rows: Vec<serde_json::Value> = (self.body.connections.iter())
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .collect();
        let template = serde_json::to_value(PeerSummary::default()).unwrap_or_default();
        output::records_of(&rows, &template)
    }

    fn metrics(&self) -> Vec<Family> {
        let rows: Vec<_> = (self.body.connections.iter())
            .map(|p| {
                let labels = vec![("id", p.id.to_string()), ("peer", p.peer.clone())];
                let mut v = serde_json::to_value(p).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.remove("id");
                }
                (labels, v)
            })
            .collect();
        output::gauges(Kind::Listen, "A peer", &rows)
    }

    fn count(&self) -> String {
        output::counted(self.body.connections.len(), "peer")
    }

    fn charts(&self) -> Vec<crate::report::chart::Chart> {
        use crate::report::chart::{bars_of, Axis};
        let bars = (self.body.connections.iter())
            .map(|p| (format!("#{} {}", p.id, p.peer), p.bytes as f64, None))
            .collect();
        vec![bars_of(
            "listen-bytes",
            "Bytes by peer",
            "What each peer sent, in the order they came.",
            Axis::Bytes,
            bars,
        )]
    }

    fn nothing_to_chart(&self) -> Option<String> {
        self.body
            .connections
            .is_empty()
            .then(|| "No peer came, so there is nothing to chart.".to_string())
    }

    fn setting(&self) -> Vec<(String, String)> {
        vec![
            ("transport".to_string(), self.body.transport.clone()),
            ("listened on".to_string(), self.body.address.clone()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_byte_a_terminal_would_interpret_passes_through() {
        assert_eq!(escape(b"hello\n"), "hello\\n");
        assert_eq!(escape(b"\x1b[2J\x07"), "\\x1b[2J\\x07");
        assert_eq!(escape(b"a\tb\rc\\d\"e"), "a\\tb\\rc\\\\d\\\"e");
        // C1 controls in UTF-8 (U+009B, a one-character CSI), DEL and NUL.
        assert_eq!(escape("\u{9b}".as_bytes()), "\\xc2\\x9b");
        assert_eq!(escape(b"\x7f\x00"), "\\x7f\\x00");
        for b in 0..=255u8 {
            let e = escape(&[b]);
            assert!(
                e.chars().all(|c| (' '..='~').contains(&c)),
                "{b:#x} gives {e:?}"
            );
        }
    }

    fn args(extra: &[&str]) -> ListenArgs {
        use clap::Parser;
        let mut v = vec!["sockbench", "listen"];
        v.extend_from_slice(extra);
        match crate::cli::Args::try_parse_from(v).unwrap().command {
            Some(crate::cli::Command::Listen(l)) => l,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_are_checked_with_what_to_do() {
        let err = |extra: &[&str]| match setup(&args(extra), Format::Table).unwrap_err() {
            // A flag badly given is the command line's fault: exit 2.
            crate::error::PlanError::Invalid(e) => e,
            other => panic!("{extra:?}: not a usage error: {other:?}"),
        };
        assert!(err(&["-t", "pipe"]).contains("unix, unix-dgram"));
        assert!(err(&["--read-size", "0"]).contains("--read-size"));
        assert!(err(&["--read-size", "abc"]).contains("--read-size"));
        assert!(err(&["-t", "tcp6", "--listen", "127.0.0.1"]).contains("other IP family"));
        assert!(err(&["-t", "unix", "--listen", "::1"]).contains("--path"));
        assert!(err(&["-t", "tcp", "--path", "/tmp/x"]).contains("--listen"));
        let long = format!("/tmp/{}", "x".repeat(120));
        assert!(err(&["-t", "unix", "--path", &long]).contains("at most 107"));
        // Any format: a document format's summary holds stdout, the log goes to stderr.
        let csv = setup(&args(&[]), Format::Csv).unwrap();
        assert!(csv.log_to_stderr && !csv.json);
        let s = setup(
            &args(&["-t", "udp6", "--read-size", "1", "-p", "0"]),
            Format::Json,
        )
        .unwrap();
        assert_eq!(s.addr, Some("[::1]:0".parse().unwrap()));
        assert_eq!((s.read_size, s.json, s.verbose), (1, true, 1));
        assert!(!s.log_to_stderr);
        let s = setup(&args(&[]), Format::Table).unwrap();
        assert!(!s.log_to_stderr && !s.json);
        assert_eq!(s.addr, Some("127.0.0.1:5301".parse().unwrap()));
    }

    #[test]
    fn a_peers_throughput_is_its_bytes_over_its_open_time() {
        let mut p = Peer::new(1, "x".into());
        p.bytes = 1_000_000;
        p.closed = Some(p.opened + Duration::from_secs(2));
        assert_eq!(p.duration(Instant::now()), Duration::from_secs(2));
        assert!((p.bits_per_second(Instant::now()) - 4e6).abs() < 1e-6);
    }
}

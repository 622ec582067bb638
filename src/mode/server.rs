//! `sockbench server`: wait for clients (`sockbench stream --server HOST ...`), play the
//! other role of each run they ask for, and log one line per test on stderr. Each client
//! has its own thread and deadlines, so one that stalls, dies or sends garbage never holds
//! up another; `--max-clients` bounds the tests that run at once. With `--data-port`, every
//! TCP and UDP test takes its data on that one port (`placement::data_port`).
//!
//! Also the hidden `sockbench peer`, the child a `--placement processes` run starts: one
//! conversation with its parent over an inherited socket.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::cli::{PeerArgs, ServerArgs};
use crate::control::auth::Key;
use crate::control::messages::{Limits, ScenarioMsg};
use crate::control::session::{Session, Step};
use crate::control::{Control, ControlError, Deadlines};
use crate::environment::Environment;
use crate::error::{CommandResult, Error, Outcome};
use crate::placement::data_port::DataPort;
use crate::placement::split::{canonical, server_run, ServerSide};
use crate::placement::trust::PeerTrust;
use crate::transport::RunDir;
use crate::vocab::units::{format_bits_per_second, format_bytes};
use crate::vocab::Peer;
use crate::vocab::Role;
use crate::workload::SideReport;

mod conns;
#[cfg(test)]
mod session_fuzz;

use conns::{Admission, Conns, Stage, Ticket};

/// One kind of accept error, logged once and then every 10 s with how often it came.
#[derive(Default)]
struct Repeats {
    last: Option<(std::io::ErrorKind, Option<i32>, Instant, u64)>,
}

impl Repeats {
    /// Note `e`; the line to log, if it is time for one.
    fn note(&mut self, e: &std::io::Error) -> Option<String> {
        let key = (e.kind(), e.raw_os_error());
        match &mut self.last {
            Some((k, c, at, n)) if (*k, *c) == key => {
                *n += 1;
                if at.elapsed() < Duration::from_secs(10) {
                    return None;
                }
                let line = format!(
                    "accept failed {n} more times in the last {:.0} s: {e}",
                    at.elapsed().as_secs_f64()
                );
                *at = Instant::now();
                *n = 0;
                Some(line)
            }
            _ => {
                self.last = Some((key.0, key.1, Instant::now(), 0));
                let hint = match e.raw_os_error() {
                    Some(nix::libc::EMFILE | nix::libc::ENFILE) => {
                        " (out of descriptors: raise the limit with `ulimit -n`, or lower --max-clients)"
                    }
                    _ => "",
                };
                Some(format!(
                    "accept failed: {e}{hint}; the clients already here are still served"
                ))
            }
        }
    }

    /// Accepting works again.
    fn clear(&mut self) {
        self.last = None;
    }
}

/// What every conversation of a server shares.
struct Shared {
    key: Option<Key>,
    /// The key's file, handed to the clients a mesh coordinator asks this agent to run.
    key_file: Option<PathBuf>,
    limits: Limits,
    path: Option<PathBuf>,
    max_clients: usize,
    verbose: bool,
    environment: Environment,
    /// `--data-port`: the one port every TCP and UDP test takes its data on.
    data_port: Option<DataPort>,
    /// Every wait of a conversation.
    deadlines: Deadlines,
    /// Where each test's line goes: stderr, or (a test's server) kept here instead.
    kept: Option<std::sync::Mutex<Vec<String>>>,
    /// Conversations past their handshake.
    active: AtomicUsize,
    /// Every control connection: bounded in total and per address, hung up on at Ctrl-C.
    conns: Conns,
    tests: AtomicU64,
    refused: AtomicU64,
    served_one: AtomicBool,
}

impl Shared {
    /// A server's shared state before any client: one test at a time, quiet.
    fn new(key: Option<Key>, limits: Limits, path: Option<PathBuf>) -> Shared {
        Shared {
            key,
            key_file: None,
            limits,
            path,
            max_clients: 1,
            verbose: false,
            environment: Environment::collect(),
            data_port: None,
            deadlines: Deadlines::default(),
            kept: None,
            active: AtomicUsize::new(0),
            conns: Conns::default(),
            tests: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            served_one: AtomicBool::new(false),
        }
    }
}

/// Run `sockbench server`.
pub fn run(args: &ServerArgs) -> CommandResult {
    let key = match &args.key_file {
        Some(p) => match Key::load(p) {
            Ok(k) => Some(k),
            Err(e) => {
                return Err(Error::usage(format!("{e:#}")));
            }
        },
        None => None,
    };
    let limits = match limits_of(args) {
        Ok(l) => l,
        Err(e) => {
            return Err(Error::usage(e));
        }
    };
    if let Err(e) = check_data_port(args.port, args.data_port) {
        return Err(Error::usage(e));
    }
    // The data port first, so a control port the kernel picks (--port 0) cannot take it.
    let data_port = match args
        .data_port
        .map(|p| open_data_port(args.listen.as_deref(), p))
    {
        Some(Ok(dp)) => Some(dp),
        Some(Err(e)) => {
            return Err(Error::failed(format!("{e:#}")));
        }
        None => None,
    };
    let listener = match bind(args.listen.as_deref(), args.port) {
        Ok(l) => l,
        Err(e) => {
            return Err(Error::failed(format!("{e:#}")));
        }
    };
    if let Err(e) = crate::interrupt::install() {
        eprintln!("sockbench: warning: cannot catch Ctrl-C: {e}");
    }
    let local = listener
        .local_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    let data = data_port.as_ref().map_or_else(
        || "data on ports the kernel picks".to_string(),
        |dp| format!("data on port {} (TCP and UDP)", dp.port()),
    );
    eprintln!(
        "sockbench server {} listening on {local} (control protocol {}); up to {} tests at once, runs of up to {} s, messages up to {}, {} streams; {data}",
        env!("CARGO_PKG_VERSION"),
        crate::control::VERSION,
        args.max_clients,
        limits.max_duration_s,
        format_bytes(limits.max_size),
        limits.max_streams
    );
    // What a killed sockbench left (queues and rings charged to this user's limits).
    for note in crate::transport::remove_stale_ipc() {
        eprintln!("sockbench server: note: {note}");
    }
    if key.is_none() {
        eprintln!(
            "sockbench server: no --key-file: any client that reaches this port can run tests (set a pre-shared key with --key-file to require one)"
        );
    }
    let mut shared = Shared::new(key, limits, args.path.clone());
    shared.key_file = args.key_file.clone();
    shared.max_clients = args.max_clients.max(1) as usize;
    shared.verbose = args.verbose;
    shared.data_port = data_port;
    let shared = Arc::new(shared);
    if let Err(e) = listener.set_nonblocking(true) {
        return Err(Error::failed(format!(
            "cannot poll the listening socket: {e}"
        )));
    }
    let mut threads = Vec::new();
    let mut accept_errors = Repeats::default();
    loop {
        if crate::interrupt::requested() {
            break;
        }
        if args.once
            && shared.served_one.load(Ordering::Relaxed)
            && shared.active.load(Ordering::Relaxed) == 0
        {
            break;
        }
        threads.retain(|h: &std::thread::JoinHandle<()>| !h.is_finished());
        match listener.accept() {
            Ok((stream, from)) => {
                let ip = canonical(from.ip());
                let ticket = match shared.conns.admit(ip, &stream) {
                    Admission::Out(why) => {
                        shared.refused.fetch_add(1, Ordering::Relaxed);
                        refuse_now(stream, &why);
                        if shared.verbose {
                            log(&shared, &format!("{from} refused: {why}"));
                        }
                        continue;
                    }
                    Admission::Exhausted(e) => {
                        // As an accept at the limit: said once, then every 10 s.
                        if let Some(line) = accept_errors.note(&e) {
                            eprintln!("sockbench server: {line}");
                        }
                        continue;
                    }
                    Admission::In { ticket, evicted } => {
                        accept_errors.clear();
                        if let (Some((who, stage)), true) = (evicted, shared.verbose) {
                            log(
                                &shared,
                                &format!("{who} hung up on ({stage:?}) to make room for {from}"),
                            );
                        }
                        ticket
                    }
                };
                let shared = Arc::clone(&shared);
                let spawned = std::thread::Builder::new()
                    .name("sb-client".into())
                    .spawn(move || converse_tcp(&shared, stream, from, ticket));
                match spawned {
                    Ok(h) => threads.push(h),
                    Err(e) => eprintln!("sockbench server: cannot start a thread for {from}: {e}"),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                // EMFILE and friends: say it (once, then every 10 s with a count) and keep
                // serving the clients already here.
                if let Some(line) = accept_errors.note(&e) {
                    eprintln!("sockbench server: {line}");
                }
                // A pause before the next try, cut short by Ctrl-C.
                for _ in 0..5 {
                    if crate::interrupt::requested() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
    // Hang up on every client (their runs end at once) and give the threads a moment.
    shared.conns.hang_up_all();
    let until = Instant::now() + Duration::from_secs(3);
    while threads.iter().any(|h| !h.is_finished()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "sockbench server: stopped after {} tests ({} refused)",
        shared.tests.load(Ordering::Relaxed),
        shared.refused.load(Ordering::Relaxed)
    );
    Ok(Outcome::done())
}

/// Run the hidden `sockbench peer`: one conversation with the parent on an inherited
/// socket.
pub fn peer(args: &PeerArgs) -> CommandResult {
    let fd = args.control_fd;
    let valid = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).is_ok();
    if !valid {
        return Err(Error::usage(
            "`peer` is started by sockbench itself (--placement processes)",
        ));
    }
    let stream = UnixStream::from(crate::sys::own_fd(fd));
    let limits = Limits {
        max_duration_s: u64::from(u32::MAX),
        max_size: crate::scenario::MAX_SIZE,
        max_streams: crate::plan::MAX_PARALLEL,
        max_memory: u64::MAX,
    };
    // Ctrl-C from a terminal reaches the child too: it ends its run (within the moment
    // its parent gives it) and removes what it made, as the parent does.
    if let Err(e) = crate::interrupt::install() {
        eprintln!("sockbench peer: warning: cannot catch Ctrl-C: {e}");
    }
    let shared = Shared::new(None, limits, args.path.clone());
    let ctl = Control::new(Box::new(stream));
    // The parent is this program: nothing it names is checked.
    match converse(
        &shared,
        ctl,
        (Peer::Parent, PeerTrust::of(None)),
        "parent".into(),
        Instant::now(),
        None,
    ) {
        Ok(()) => Ok(Outcome::done()),
        // The parent says why, once.
        Err(_) if crate::interrupt::requested() => Ok(Outcome::interrupted()),
        Err(e) => Err(Error::failed(format!("peer: {e:#}"))),
    }
}

fn limits_of(args: &ServerArgs) -> Result<Limits, String> {
    let size = |name: &str, t: &str| {
        crate::vocab::units::parse_size(t).map_err(|e| format!("--{name}: {e}"))
    };
    let max_duration = crate::vocab::units::parse_duration(&args.max_duration)
        .map_err(|e| format!("--max-duration: {e}"))?;
    if max_duration < Duration::from_secs(1) {
        return Err("--max-duration must be at least 1 s".into());
    }
    if args.max_streams == 0 || args.max_streams > crate::plan::MAX_PARALLEL {
        return Err(format!(
            "--max-streams must be between 1 and {}",
            crate::plan::MAX_PARALLEL
        ));
    }
    Ok(Limits {
        max_duration_s: max_duration.as_secs(),
        max_size: size("max-size", &args.max_size)?,
        max_streams: args.max_streams,
        max_memory: size("max-memory", &args.max_memory)?,
    })
}

/// Check `--data-port` against `--port`.
///
/// # Errors
/// Port 0, or the control port: the message says what to give instead.
fn check_data_port(port: u16, data_port: Option<u16>) -> Result<(), String> {
    match data_port {
        Some(0) => Err(
            "--data-port 0 is not a fixed port: give the port every test's data should use (without --data-port, the kernel picks one per test)".into(),
        ),
        Some(d) if d == port => Err(format!(
            "--data-port {d} is the control port (--port {port}): give the data another port"
        )),
        _ => Ok(()),
    }
}

/// The data port's listener at `--listen` (default: every address).
fn open_data_port(listen: Option<&str>, port: u16) -> anyhow::Result<DataPort> {
    let ip = listen
        .map(|t| {
            t.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .with_context(|| format!("--listen {t:?} is not an IP address"))
        })
        .transpose()?;
    DataPort::open(ip, port).with_context(|| format!("cannot take --data-port {port}"))
}

/// The listening socket: `--listen` (default: every address, IPv6 and IPv4) at `port`.
fn bind(listen: Option<&str>, port: u16) -> anyhow::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let ip: IpAddr = match listen {
        Some(t) => t
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .with_context(|| format!("--listen {t:?} is not an IP address"))?,
        None => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let addr = SocketAddr::new(ip, port);
    let open = |addr: SocketAddr| -> std::io::Result<TcpListener> {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        if addr.is_ipv6() {
            sock.set_only_v6(false)?;
        }
        sock.set_reuse_address(true)?;
        sock.bind(&addr.into())?;
        sock.listen(128)?;
        Ok(sock.into())
    };
    match open(addr) {
        Ok(l) => Ok(l),
        // No IPv6 on this host: every IPv4 address instead.
        Err(_) if listen.is_none() => open(SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), port))
            .with_context(|| format!("cannot listen on port {port}")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(anyhow::anyhow!(e).context(format!(
            "cannot listen on {addr}: the port is in use (another sockbench server?): pick another with --port"
        ))),
        Err(e) => Err(anyhow::anyhow!(e).context(format!("cannot listen on {addr}"))),
    }
}

/// Tell a connection the server did not take in why, and close it (best effort, without
/// waiting on a peer that does not read).
fn refuse_now(stream: TcpStream, why: &str) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let mut ctl = Control::new(Box::new(stream));
    ctl.refuse(why);
    ctl.stream().shutdown();
}

/// One TCP client, from accept to hang-up.
fn converse_tcp(shared: &Shared, stream: TcpStream, from: SocketAddr, ticket: Ticket) {
    let accepted = Instant::now();
    let peer = if crate::transport::is_local_address(from.ip()) {
        Peer::Local
    } else {
        Peer::Remote
    };
    let _ = stream.set_nodelay(true);
    let ctl = Control::new(Box::new(stream));
    let trust = PeerTrust::of(ctl.stream().addrs());
    let who = SocketAddr::new(canonical(from.ip()), from.port()).to_string();
    let r = converse(
        shared,
        ctl,
        (peer, trust),
        who.clone(),
        accepted,
        Some(&ticket),
    );
    shared.conns.remove(ticket.id);
    if let Err(e) = r {
        if e.downcast_ref::<Logged>().is_some() {
            return;
        }
        if shared.verbose || !is_handshake_noise(&e) {
            log(shared, &format!("{who} {e:#}"));
        }
    }
}

/// Whether `e` is a client that never spoke the protocol (a port scan, an idle `nc`):
/// logged only with -v.
fn is_handshake_noise(e: &anyhow::Error) -> bool {
    e.downcast_ref::<ControlError>().is_some_and(|c| {
        matches!(
            c,
            ControlError::Deadline(_)
                | ControlError::Unfinished(_)
                | ControlError::Closed
                | ControlError::Frame(_)
        )
    })
}

/// Holds one of the `--max-clients` slots while a conversation is past its handshake.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long a client over `--max-clients` waits for a test to end before it is told the
/// server is busy (a test whose client just died takes a moment to be noticed).
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// Take one of the `--max-clients` slots, waiting up to [`BUSY_WAIT`] for one to free up.
fn take_slot(shared: &Shared) -> bool {
    let until = Instant::now() + BUSY_WAIT;
    loop {
        let taken = shared
            .active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < shared.max_clients).then_some(n + 1)
            })
            .is_ok();
        if taken {
            return true;
        }
        if Instant::now() > until || crate::interrupt::requested() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One conversation: the handshake within its deadlines, then runs until the client says
/// goodbye, hangs up, idles past the deadline or breaks a rule. `trust` is what this side
/// knows of the client's process, for every run.
fn converse(
    shared: &Shared,
    mut ctl: Control,
    (peer, trust): (Peer, PeerTrust),
    who: String,
    accepted: Instant,
    ticket: Option<&Ticket>,
) -> anyhow::Result<()> {
    let mut session =
        Session::new(shared.key.clone(), shared.limits, peer)?.with_deadlines(shared.deadlines);
    ctl.finish_frames_within(shared.deadlines.step);
    // Where the conversation is, for the table of connections (a child's parent has no
    // place in it).
    let stage = |s: Stage| {
        if let Some(t) = ticket {
            t.set(s);
        }
    };
    let mut slot: Option<Slot<'_>> = None;
    let result = (|| -> anyhow::Result<()> {
        loop {
            let wait = if session.established() {
                session.wait()
            } else {
                // The whole handshake, however the client spreads its bytes.
                session
                    .wait()
                    .min(
                        shared
                            .deadlines
                            .handshake
                            .saturating_sub(accepted.elapsed()),
                    )
                    .max(Duration::from_millis(1))
            };
            ctl.allow(session.accepts());
            let frame = match ctl.next(wait) {
                Ok(f) => f,
                Err(ControlError::Closed) if session.established() => return Ok(()),
                // The server is stopping: it hangs up on everyone.
                Err(ControlError::Interrupted) => return Ok(()),
                Err(e) => {
                    if e.is_deadline() {
                        ctl.refuse("too slow: the deadline for this step passed");
                    }
                    return Err(e.into());
                }
            };
            match session.on_frame(&frame) {
                Step::Reply(kind, body) => {
                    let value: serde_json::Value = serde_json::from_slice(&body)?;
                    ctl.send(kind, &value)?;
                }
                Step::Run(msg) => {
                    if slot.is_none() {
                        if !take_slot(shared) {
                            shared.refused.fetch_add(1, Ordering::Relaxed);
                            let why = format!(
                                "the server is busy: {} tests are running (its --max-clients); try again shortly",
                                shared.max_clients
                            );
                            ctl.refuse(&why);
                            anyhow::bail!("refused: {why}");
                        }
                        slot = Some(Slot(&shared.active));
                        shared.served_one.store(true, Ordering::Relaxed);
                    }
                    stage(Stage::Busy);
                    run_one(shared, &mut ctl, &msg, (peer, &trust), &who)?;
                }
                Step::Drive(msg) => {
                    if slot.is_none() {
                        if !take_slot(shared) {
                            shared.refused.fetch_add(1, Ordering::Relaxed);
                            let why = format!(
                                "the agent is busy: {} tests are running (its --max-clients); try again shortly",
                                shared.max_clients
                            );
                            ctl.refuse(&why);
                            anyhow::bail!("refused: {why}");
                        }
                        slot = Some(Slot(&shared.active));
                        shared.served_one.store(true, Ordering::Relaxed);
                    }
                    stage(Stage::Busy);
                    drive_one(shared, &mut ctl, &msg, &who)?;
                }
                Step::Ignore => {}
                Step::End => return Ok(()),
                Step::Refuse(why) => {
                    shared.refused.fetch_add(1, Ordering::Relaxed);
                    ctl.refuse(&why);
                    anyhow::bail!("refused: {why}");
                }
            }
            if session.established() {
                stage(Stage::Idle);
            }
        }
    })();
    ctl.stream().shutdown();
    drop(slot);
    result
}

/// One test a mesh coordinator asked this agent to drive against another agent, logged.
fn drive_one(
    shared: &Shared,
    ctl: &mut Control,
    msg: &crate::control::messages::DriveMsg,
    who: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    // The coordinator sends nothing until the report: anything else, or the end of the
    // connection, means it is gone (a zero wait would not read at all).
    let mut gone = || !matches!(ctl.poll(Duration::from_millis(1)), Ok(None));
    let report = crate::mesh::agent::drive(msg, shared.key_file.as_deref(), &mut gone);
    shared.tests.fetch_add(1, Ordering::Relaxed);
    let outcome = match &report.error {
        Some(e) => format!("failed: {e}"),
        None => "done".to_string(),
    };
    eprintln!(
        "sockbench server: mesh test for {who}: {} to {} ({:.1} s), {outcome}",
        msg.workload,
        msg.target,
        started.elapsed().as_secs_f64()
    );
    ctl.send(crate::control::frame::FrameType::Report, &report)?;
    Ok(())
}

/// One run for a client, logged.
fn run_one(
    shared: &Shared,
    ctl: &mut Control,
    msg: &ScenarioMsg,
    (peer, trust): (Peer, &PeerTrust),
    who: &str,
) -> anyhow::Result<()> {
    let sc = &msg.scenario;
    let what = format!(
        "{} {} {} {} -P {} ({})",
        sc.workload,
        sc.transport,
        sc.engine,
        format_bytes(sc.size),
        sc.parallel,
        match (msg.bidir, msg.server_role) {
            (true, _) => "both ways",
            (false, Role::Sender) => "server sends",
            (false, Role::Receiver) => "server receives",
        }
    );
    let dir = if sc.transport.uses_path() {
        Some(RunDir::open(shared.path.as_ref())?)
    } else {
        None
    };
    let side = ServerSide {
        peer,
        trust,
        deadlines: shared.deadlines,
        max_duration: Duration::from_secs(shared.limits.max_duration_s),
        environment: &shared.environment,
        data_port: shared.data_port.as_ref(),
    };
    let r = server_run(ctl, msg, &side, dir);
    shared.tests.fetch_add(1, Ordering::Relaxed);
    match r {
        Ok(reports) => {
            if peer != Peer::Parent {
                log(shared, &format!("{who} {what}: {}", summary(&reports)));
            }
            Ok(())
        }
        Err(e) if peer == Peer::Parent => Err(e.context(format!("{what} failed"))),
        Err(e) => {
            let why = if crate::interrupt::requested() {
                "the server is stopping".to_string()
            } else {
                format!("{e:#}")
            };
            log(shared, &format!("{who} {what}: failed: {why}"));
            Err(Logged.into())
        }
    }
}

/// A test's failure, already logged with what the test was.
#[derive(Debug, thiserror::Error)]
#[error("the test failed (logged)")]
struct Logged;

/// The server role's own count of a run: bytes, messages and rate over its interval.
fn summary(reports: &[(Role, SideReport)]) -> String {
    [Role::Receiver, Role::Sender]
        .into_iter()
        .filter(|role| reports.iter().any(|(r, _)| r == role))
        .map(|role| {
            let of: Vec<&SideReport> = reports
                .iter()
                .filter(|(r, _)| *r == role)
                .map(|(_, s)| s)
                .collect();
            role_summary(&of, role)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One role's count.
fn role_summary(reports: &[&SideReport], role: Role) -> String {
    let bytes: u64 = reports.iter().map(|r| r.bytes).sum();
    let messages: u64 = reports.iter().map(|r| r.messages).sum();
    let secs = reports
        .iter()
        .filter_map(|r| r.elapsed)
        .max()
        .map_or(0.0, |d| d.as_secs_f64());
    let rate = if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    };
    format!(
        "{} {bytes} bytes ({}) in {messages} messages over {secs:.3} s ({})",
        if role == Role::Sender {
            "sent"
        } else {
            "received"
        },
        format_bytes(bytes),
        format_bits_per_second(rate)
    )
}

/// A line on stderr, with the time (UTC).
fn log(shared: &Shared, line: &str) {
    if let Some(kept) = &shared.kept {
        kept.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line.to_string());
        return;
    }
    eprintln!("{} {}", utc_now(), crate::control::wire::clean(line, 2000));
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    crate::vocab::units::utc(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_port_must_be_fixed_and_not_the_control_port() {
        assert!(check_data_port(5201, None).is_ok());
        assert!(check_data_port(5201, Some(5291)).is_ok());
        assert!(check_data_port(0, Some(5291)).is_ok());
        let same = check_data_port(5201, Some(5201)).unwrap_err();
        assert!(same.contains("control port"), "{same}");
        let zero = check_data_port(5201, Some(0)).unwrap_err();
        assert!(zero.contains("not a fixed port"), "{zero}");
    }
}

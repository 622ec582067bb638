//! A run split across two processes that talk over a control connection: this process
//! runs one role of every stream, the peer (a `sockbench server`, or a child sockbench)
//! the other. Both halves go through the same steps, in this order:
//!
//! 1. the client sends the scenario and the role the server takes;
//! 2. the server listens where it listens and answers with its endpoints and a token;
//! 3. the client dials those (a connection-oriented socket first sends the token) and
//!    listens where it listens (a one-way transport is opened by its reader), and says so;
//! 4. the server accepts (checking each token and the peer's address), dials the
//!    client's listeners, starts its roles and says so when they wait at the line;
//! 5. the client accepts, starts its roles, and when they wait at the line says go;
//! 6. while the roles run, each side carries its roles' signals to the other;
//! 7. the server sends what its roles measured.
//!
//! Either side ends the run at once when the other goes away, sends a refusal, or goes
//! past the run's deadline: its blocked roles are woken by shutting their sockets down
//! (through duplicates of the descriptors, so no descriptor another test reuses is ever
//! touched).
//!
//! A server with `--data-port` listens in step 2 on that one port instead of ports the
//! kernel picks: its TCP connections come through the server's shared listener, which
//! routes each to its run by the token (see `data_port`), and its UDP sockets join the
//! port's `SO_REUSEPORT` group and are connected to the client's endpoints in step 4.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use super::data_port::DataPort;
use super::trust::{PeerTrust, Pinned};
use super::RunError;
use crate::control::frame::FrameType;
use crate::control::messages::{
    channels_of, Channel, Ready, RunResult, ScenarioMsg, SignalMsg, Start, Wired,
};
use crate::control::wire::WireSide;
use crate::control::{parse, Control, ControlError, Deadlines};
use crate::interrupt;
use crate::scenario::Scenario;
use crate::scenario::Stop;
use crate::transport::connector::{self, Dialer};
use crate::transport::RunDir;
use crate::transport::{
    self, Conn, Connected, Endpoint, LinkInfo, Listener, TransportKind, TransportOptions,
};
use crate::vocab::Peer;
use crate::vocab::Role;
use crate::workload::{self, peer_link, spec, PeerLink, Side, SideReport, StartLine, Wiring};

/// Bytes of a run's token.
pub const TOKEN_BYTES: usize = 16;
/// How long after Ctrl-C the client waits for the run to wind down (its roles' reports
/// and the peer's result, so that what was measured is kept) before it abandons it (the
/// whole stop is promised within 100 ms).
const INTERRUPT_GRACE: Duration = Duration::from_millis(50);
/// How long the roles of an abandoned run get to end once their sockets are shut down.
const JOIN_GRACE: Duration = Duration::from_secs(2);
/// The same after Ctrl-C: the process is about to exit, and a role blocked where no
/// waker reaches (a FIFO's write to a peer that stopped reading) ends with it.
const INTERRUPTED_JOIN_GRACE: Duration = Duration::from_millis(20);

/// Whether a data connection of `kind` proves itself with the run's token: the
/// connection-oriented sockets, where anyone who can reach the port could connect first.
/// (UDP and Unix datagram sockets are connected to the peer's own endpoint, which the
/// authenticated control connection carried; FIFOs, queues and rings are private to
/// the user who made them.)
pub fn carries_token(kind: TransportKind) -> bool {
    matches!(
        kind,
        TransportKind::Tcp
            | TransportKind::Tcp6
            | TransportKind::Unix
            | TransportKind::UnixSeqpacket
    )
}

/// This process's roles of one run, as threads.
pub struct LocalRoles {
    handles: Vec<JoinHandle<()>>,
    rx: Receiver<(Role, io::Result<SideReport>)>,
    expected: usize,
    start: StartLine,
    /// Per stream: the bridge's end of the role's link to its peer role.
    bridges: Vec<PeerLink>,
    /// What wakes each role's end when the run is abandoned (see `Conn::waker`).
    wakers: Vec<transport::Waker>,
    reports: Vec<(Role, SideReport)>,
    failure: super::FirstCause,
}

impl LocalRoles {
    /// Start `roles[i]` on stream `i`'s end (already connected), each waiting at the start
    /// line that [`LocalRoles::open`] opens.
    ///
    /// # Errors
    /// The engine refuses an end, a thread cannot be started.
    pub fn spawn(
        sc: &Scenario,
        stop: Stop,
        role_of: &[Role],
        ends: Vec<(Box<dyn Conn>, Option<workload::Endpoint>)>,
    ) -> anyhow::Result<LocalRoles> {
        let engine = sc.engine.engine_for(sc.extras.engine_options());
        let work = spec(sc.workload).roles(sc, stop);
        let start = StartLine::for_scenario(ends.len() + 1, sc);
        let (tx, rx) = mpsc::channel();
        let mut roles = LocalRoles {
            handles: Vec::new(),
            rx,
            expected: ends.len(),
            start: start.clone(),
            bridges: Vec::new(),
            wakers: Vec::new(),
            reports: Vec::new(),
            failure: super::FirstCause::default(),
        };
        for (i, (conn, endpoint)) in ends.into_iter().enumerate() {
            let role = role_of[i];
            let cpu = sc
                .cpus
                .map(|c| if role == Role::Sender { c.0 } else { c.1 });
            roles.wakers.extend(conn.waker());
            let conn = match engine.attach(conn) {
                Ok(c) => c,
                Err(e) => {
                    roles.abort();
                    return Err(anyhow!(e).context("the engine cannot take this end"));
                }
            };
            let (mine, bridge) = peer_link();
            roles.bridges.push(bridge);
            let side = Side {
                conn,
                endpoint,
                link: mine,
                start: start.for_side(),
            };
            let spawned = super::spawn_role(role, i, side, Arc::clone(&work), cpu, tx.clone());
            match spawned {
                Ok(h) => roles.handles.push(h),
                Err(e) => {
                    roles.abort();
                    return Err(e);
                }
            }
        }
        Ok(roles)
    }

    /// Whether every role waits at the start line.
    pub fn ready(&self) -> bool {
        self.start.others_arrived()
    }

    /// Wait (up to `wait`) until every role waits at the start line, looking every `tick`
    /// (every millisecond at most).
    fn wait_ready(&self, wait: Duration, tick: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + wait;
        while !self.ready() {
            if Instant::now() > until {
                bail!("the roles were not ready within {} s", wait.as_secs());
            }
            if interrupt::requested() {
                bail!("interrupted");
            }
            std::thread::sleep(tick.min(Duration::from_millis(1)));
        }
        Ok(())
    }

    /// Let the roles go.
    pub fn open(&self) {
        self.start.open();
    }

    /// Abandon the run: wake every role (sockets shut down, the line opened) and give
    /// them a moment to end.
    pub fn abort(&mut self) {
        for wake in &self.wakers {
            wake();
        }
        self.start.open();
        let began = Instant::now();
        while self.handles.iter().any(|h| !h.is_finished()) {
            // A Ctrl-C during the wait (a child's, from its parent) shortens it too.
            let grace = if interrupt::requested() {
                INTERRUPTED_JOIN_GRACE
            } else {
                JOIN_GRACE
            };
            if began.elapsed() >= grace {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        for h in self.handles.drain(..) {
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }

    /// Collect what has come in; true when every role has reported.
    fn collect(&mut self, transport: TransportKind) -> bool {
        loop {
            match self.rx.try_recv() {
                Ok((role, Ok(r))) => self.reports.push((role, r)),
                Ok((role, Err(e))) => {
                    self.failure
                        .record(e, || format!("{transport} {role} failed"));
                    self.reports.push((role, SideReport::default()));
                }
                Err(TryRecvError::Empty) => return self.reports.len() >= self.expected,
                Err(TryRecvError::Disconnected) => return true,
            }
        }
    }

    /// Wait up to `wait` for a role to report (at once when one does).
    fn await_report(&mut self, transport: TransportKind, wait: Duration) {
        match self.rx.recv_timeout(wait) {
            Ok((role, Ok(r))) => self.reports.push((role, r)),
            Ok((role, Err(e))) => {
                self.failure
                    .record(e, || format!("{transport} {role} failed"));
                self.reports.push((role, SideReport::default()));
            }
            Err(_) => {}
        }
    }

    /// Carry the roles' signals to the peer.
    fn forward(&self, ctl: &mut Control) -> Result<(), ControlError> {
        for (i, b) in self.bridges.iter().enumerate() {
            while let Some(s) = b.try_take() {
                ctl.send(FrameType::Signal, &SignalMsg::of(i as u32, s))?;
            }
        }
        Ok(())
    }

    /// Deliver a signal from the peer.
    fn deliver(&self, m: SignalMsg) -> Result<(), ControlError> {
        let b = self
            .bridges
            .get(m.stream as usize)
            .ok_or_else(|| ControlError::Malformed {
                kind: FrameType::Signal,
                reason: format!("stream {} does not exist", m.stream),
            })?;
        b.signal(m.signal());
        Ok(())
    }

    /// Join the threads (all have reported) and hand over their reports.
    fn finish(mut self) -> anyhow::Result<Vec<(Role, SideReport)>> {
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
        match self.failure.take() {
            Some(e) => Err(e),
            None => Ok(std::mem::take(&mut self.reports)),
        }
    }
}

impl Drop for LocalRoles {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.abort();
        }
    }
}

/// How the coordinating thread ends a run.
enum Ending {
    Done(Vec<(Role, SideReport)>, Option<Box<RunResult>>),
    Interrupted,
}

/// Coordinate a running run: carry signals both ways, collect the roles' reports, and
/// (on the client) the server's result; abandon the run when the peer goes away, the
/// deadline passes, the server's result has not come within the stall grace of this
/// side's roles ending (on the client: a silent server is not waited for, whatever the
/// run's stop), or (on the client) Ctrl-C.
fn drive(
    ctl: &mut Control,
    roles: &mut LocalRoles,
    sc: &Scenario,
    (limit, deadlines): (Duration, &Deadlines),
    client: bool,
) -> Result<Ending, RunError> {
    let started = Instant::now();
    let mut result: Option<Box<RunResult>> = None;
    let mut interrupted_at: Option<Instant> = None;
    let mut done_at: Option<Instant> = None;
    loop {
        let fail = |roles: &mut LocalRoles, e: anyhow::Error| {
            roles.abort();
            Err(RunError::Failed(e))
        };
        if let Err(e) = roles.forward(ctl) {
            return fail(roles, anyhow!(e).context("the control connection failed"));
        }
        let done = roles.collect(sc.transport);
        if done && (!client || result.is_some()) {
            return Ok(Ending::Done(std::mem::take(&mut roles.reports), result));
        }
        let waited = done.then(|| done_at.get_or_insert_with(Instant::now).elapsed());
        if waited.is_some_and(|w| w > deadlines.stall) {
            ctl.refuse("the client's roles ended and no result came: the run is abandoned");
            return fail(
                roles,
                anyhow!(
                    "{} run stalled: no result from the server {:.1} s after this side's roles ended; the server may be wedged",
                    sc.transport,
                    deadlines.stall.as_secs_f64()
                ),
            );
        }
        if client && interrupt::requested() {
            let at = *interrupted_at.get_or_insert_with(Instant::now);
            if at.elapsed() > INTERRUPT_GRACE {
                ctl.refuse("the client was interrupted (Ctrl-C)");
                roles.abort();
                return Ok(Ending::Interrupted);
            }
        }
        if started.elapsed() > limit {
            ctl.refuse(&format!(
                "the run was abandoned after {:.0} s (a timed run's end plus {:.0} s, or the server's --max-duration)",
                started.elapsed().as_secs_f64(),
                deadlines.stall.as_secs_f64()
            ));
            return fail(
                roles,
                anyhow!(
                    "{} run stalled: no end after {:.0} s; the peer or the transport may be wedged",
                    sc.transport,
                    started.elapsed().as_secs_f64()
                ),
            );
        }
        if client && result.is_some() {
            // The server's part is over: only this side's roles are waited for, and their
            // end is seen as it comes (a socket's timeout would round the tick up to the
            // kernel's clock, several milliseconds).
            roles.await_report(sc.transport, deadlines.tick);
            continue;
        }
        let frame = match ctl.poll(deadlines.tick) {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(e) => {
                return fail(
                    roles,
                    anyhow!(e).context("the peer went away during the run"),
                )
            }
        };
        match frame.kind {
            FrameType::Signal => {
                let delivered =
                    parse::<SignalMsg>(&frame, FrameType::Signal).and_then(|m| roles.deliver(m));
                if let Err(e) = delivered {
                    ctl.refuse(&e.to_string());
                    return fail(roles, e.into());
                }
            }
            FrameType::Result if client => match parse::<RunResult>(&frame, FrameType::Result) {
                Ok(r) => result = Some(Box::new(r)),
                Err(e) => return fail(roles, e.into()),
            },
            _ => {
                let e = parse::<SignalMsg>(&frame, FrameType::Signal).err();
                let e = e.map_or_else(|| anyhow!("unexpected control frame"), anyhow::Error::from);
                if !matches!(frame.kind, FrameType::Error) {
                    ctl.refuse(&e.to_string());
                }
                return fail(roles, e.context("the run was abandoned"));
            }
        }
    }
}

/// How long a run of `stop` may take at most: a timed run its time and a grace (`stall`)
/// for a slow end; a run bounded by count or bytes, `max` (the server's --max-duration).
fn run_limit(stop: Stop, max: Duration, stall: Duration) -> Duration {
    match stop {
        Stop::Duration(d) => d.saturating_add(stall),
        _ => max,
    }
}

/// A channel's end in this process: dialled, or listened on (to accept later).
enum Half {
    Dialled(Box<dyn Conn>),
    Listening(Box<dyn Listener>),
    /// To come through the server's data port (`--data-port`), with the run's token.
    OnDataPort,
    Inherited(Box<dyn Conn>),
    Accepted(Box<dyn Conn>),
}

impl Half {
    fn conn(self) -> Box<dyn Conn> {
        match self {
            Half::Dialled(c) | Half::Inherited(c) | Half::Accepted(c) => c,
            Half::Listening(_) | Half::OnDataPort => {
                unreachable!("every listener was accepted before the ends are used")
            }
        }
    }
}

/// Put each stream's end together from its channels: a two-way socket as it is, a
/// one-way transport's channel (or its pair of channels, one each way) as one end.
fn ends(channels: &[Channel], halves: Vec<Half>, role_of: &[Role]) -> Vec<Box<dyn Conn>> {
    let mut per_stream: Vec<Vec<(Channel, Box<dyn Conn>)>> =
        role_of.iter().map(|_| Vec::new()).collect();
    for (ch, half) in channels.iter().zip(halves) {
        per_stream[ch.stream].push((*ch, half.conn()));
    }
    per_stream
        .into_iter()
        .zip(role_of)
        .map(|(mut chans, &role)| {
            if chans.len() == 1 {
                return chans.pop().expect("one channel").1;
            }
            // forward carries sender to receiver; backward the other way.
            let (fwd, back): (Vec<_>, Vec<_>) = chans.into_iter().partition(|(c, _)| c.forward);
            let fwd = fwd.into_iter().next().expect("a forward channel").1;
            let back = back.into_iter().next().expect("a backward channel").1;
            match role {
                Role::Sender => transport::duplex(fwd, back),
                Role::Receiver => transport::duplex(back, fwd),
            }
        })
        .collect()
}

/// The role that is not `r`.
fn other(r: Role) -> Role {
    match r {
        Role::Sender => Role::Receiver,
        Role::Receiver => Role::Sender,
    }
}

/// Whether this process reads the channel (it is the receiving end of its data).
fn reads(ch: &Channel, role: Role) -> bool {
    (role == Role::Receiver) == ch.forward
}

/// Read and check the run's token on a freshly accepted connection.
fn check_token(
    conn: &mut Box<dyn Conn>,
    kind: TransportKind,
    token: &[u8],
    wait: Duration,
) -> anyhow::Result<()> {
    let mut got = [0u8; TOKEN_BYTES];
    conn.set_recv_timeout(Some(wait))
        .context("cannot bound the wait for the token")?;
    let n = workload::recv_message(conn.as_mut(), &mut got, kind.framing())
        .context("no token came on a data connection")?;
    conn.set_recv_timeout(None)?;
    if n != TOKEN_BYTES || !crate::vocab::same_token(&got, token) {
        bail!("a data connection came without this run's token: refused (another program connected to the test's port?)");
    }
    Ok(())
}

pub use crate::transport::canonical_ip as canonical;

/// A test build playing a hostile peer: every endpoint announced becomes the forged one.
fn forge(endpoints: &mut [Option<Endpoint>]) {
    let Some(json) = crate::testhooks::forged_endpoint() else {
        return;
    };
    let forged: Endpoint = serde_json::from_str(&json).expect("SOCKBENCH_TEST_FORGE_ENDPOINT");
    for e in endpoints.iter_mut().filter(|e| e.is_some()) {
        *e = Some(forged.clone());
    }
}

/// The peer address of a connected socket end.
fn peer_ip(conn: &dyn Conn) -> Option<IpAddr> {
    let fd = conn.raw_fd()?;
    let addr: nix::sys::socket::SockaddrStorage = nix::sys::socket::getpeername(fd).ok()?;
    if let Some(a) = addr.as_sockaddr_in() {
        return Some(IpAddr::V4(a.ip()));
    }
    addr.as_sockaddr_in6()
        .map(|a| canonical(IpAddr::V6(a.ip())))
}

/// The address this host's listeners for a run of `kind` bind, given the address the
/// peer reached this host's control socket at: the same address (so data takes the
/// control connection's path), or the other family's loopback.
///
/// # Errors
/// An IP transport of the other family over a non-loopback control connection.
pub fn bind_for(
    kind: TransportKind,
    control_local: Option<IpAddr>,
) -> anyhow::Result<Option<SocketAddr>> {
    let Some(ip) = control_local.map(canonical) else {
        return Ok(None);
    };
    if !kind.is_ip() {
        return Ok(None);
    }
    let ip = match (kind.is_ipv6(), ip) {
        (true, IpAddr::V6(_)) | (false, IpAddr::V4(_)) => ip,
        (true, IpAddr::V4(v4)) if v4.is_loopback() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        (false, IpAddr::V6(v6)) if v6.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        _ => bail!(
            "{kind} needs the server reached over IPv{}: give --server an address of that family",
            if kind.is_ipv6() { 6 } else { 4 }
        ),
    };
    Ok(Some(SocketAddr::new(ip, 0)))
}

/// The loopback of the family, where a run's listeners bind when the control connection
/// has no IP address.
fn bind_addr_default(ipv6: bool) -> IpAddr {
    if ipv6 {
        IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
    }
}

/// Options for this process's transports in a run of `sc` whose steps may take `step`.
fn options(
    sc: &Scenario,
    dir: Option<&RunDir>,
    bind: Option<SocketAddr>,
    step: Duration,
) -> TransportOptions {
    TransportOptions {
        sndbuf: sc.sndbuf.map(|n| n as usize),
        rcvbuf: sc.rcvbuf.map(|n| n as usize),
        nodelay: sc.nodelay,
        bind,
        connect: None,
        dir: dir.map(RunDir::path).unwrap_or_default(),
        message_bytes: sc.size as usize,
        peer_uid: None,
        // The peer connects before it says it has: waiting for a connection that has not
        // come by then is waiting for one that will not.
        accept_wait: Some(step.min(transport::ACCEPT_WAIT)),
        token: None,
    }
}

/// What the client brings to a run besides the scenario.
pub struct ClientSide<'a> {
    /// What this side knows of the server (found once per conversation): what it names
    /// passes these checks before it is used.
    pub trust: &'a PeerTrust,
    /// How long each step may take.
    pub deadlines: Deadlines,
    /// The server's --max-duration (from its welcome): a run without a planned end (a
    /// count or bytes) is abandoned once it is past, and the stall grace, as the server
    /// abandons it.
    pub max_duration: Duration,
    /// Where this side makes names (a private directory, removed as soon as every
    /// connection is made), for transports with names in the file system.
    pub dir: Option<RunDir>,
    /// Ends of an anonymous transport made before the peer was started, one per channel:
    /// this process's end and the descriptor the child inherited.
    pub inherited: Vec<(Box<dyn Conn>, RawFd)>,
}

/// What the client's half of a run brings back.
pub struct ClientOutcome {
    /// This side's role reports, each with its role.
    pub reports: Vec<(Role, SideReport)>,
    /// What the server sent.
    pub result: Box<RunResult>,
    /// This side's view of the first stream's connection.
    pub link: LinkInfo,
    /// Time to open one stream's connection (dial, or listen and accept), on average.
    pub connect_time: Duration,
}

/// The client's half of one run: this process plays the other role than `server_role`.
///
/// # Errors
/// As [`RunError`]: Ctrl-C, or the run failing on either side (the server's reason
/// included).
pub fn client_run(
    ctl: &mut Control,
    sc: &Scenario,
    stop: Stop,
    server_role: Role,
    bidir: bool,
    mut side: ClientSide<'_>,
) -> Result<ClientOutcome, RunError> {
    let deadlines = side.deadlines;
    let mut msg_sc = sc.clone();
    msg_sc.stop = stop;
    msg_sc.bind = None;
    msg_sc.connect = None;
    let msg = ScenarioMsg {
        scenario: msg_sc,
        server_role,
        bidir,
    };
    let server_roles = msg.server_roles();
    let my_roles: Vec<Role> = server_roles.iter().map(|r| other(*r)).collect();
    let my_role = my_roles[0];
    let control_err = |e: ControlError| match e {
        ControlError::Interrupted => RunError::Interrupted,
        e => RunError::Failed(anyhow!(e)),
    };
    // Each step takes only the server's frames it expects (and a refusal, and a signal
    // that trailed the last run): nothing larger is held than the step's own frame.
    ctl.allow(&[FrameType::Ready, FrameType::Signal, FrameType::Error]);
    ctl.send(FrameType::Scenario, &msg).map_err(control_err)?;
    let ready: Ready = ctl
        .expect(FrameType::Ready, deadlines.step)
        .map_err(|e| match e {
            ControlError::Refused(why) => {
                RunError::Failed(anyhow!("the server refused the run: {why}"))
            }
            e => control_err(e),
        })?;
    let token = hex::decode(&ready.token)
        .map_err(|_| RunError::Failed(anyhow!("the server's token is not hex")))?;
    let bind = bind_for(sc.transport, ctl.stream().local_ip()).map_err(RunError::Failed)?;
    let opts = options(sc, side.dir.as_ref(), bind, deadlines.step);
    let channels = channels_of(sc, &server_roles);
    let wiring = spec(sc.workload).wiring(sc.transport);
    let mut wired = Wired::default();
    let mut halves = Vec::new();
    let mut dial_endpoints = Vec::new();
    let mut link = LinkInfo::default();
    let mut opening = Duration::ZERO;
    let fail = |e: anyhow::Error, ctl: &mut Control| {
        ctl.refuse(&format!("{e:#}"));
        RunError::Failed(e)
    };
    // Nothing the server names is used unchecked; the checked files stay pinned (held
    // open) until the run is over.
    let trust = side.trust;
    let mut pins: Vec<Pinned> = Vec::new();
    if wiring == Wiring::ListenDial {
        dial_endpoints = ready.endpoints.clone();
    } else if ready.endpoints.len() != channels.len() {
        return Err(fail(
            anyhow!("the server's endpoints do not match the run's channels"),
            ctl,
        ));
    }
    let anonymous = !side.inherited.is_empty();
    for (i, ch) in channels.iter().enumerate() {
        if anonymous {
            let (conn, fd) = side.inherited.remove(0);
            halves.push(Half::Inherited(conn));
            wired
                .endpoints
                .push(Some(Endpoint::Name(format!("fd:{fd}"))));
            wired.locals.push(None);
            continue;
        }
        if ch.server_listens {
            let Some(ep) = &ready.endpoints[i] else {
                return Err(fail(
                    anyhow!("the server gave no endpoint for channel {i}"),
                    ctl,
                ));
            };
            let pinned = match trust.check(sc.transport, ep, "the server's endpoint") {
                Ok(p) => p,
                Err(e) => return Err(fail(e, ctl)),
            };
            let mut checked = opts.clone();
            checked.peer_uid = pinned.owner;
            let t = Instant::now();
            let dialled = transport::connect(sc.transport, &pinned.endpoint, &checked)
                .with_context(|| {
                    format!("cannot reach the server's {} endpoint {ep}", sc.transport)
                });
            pins.push(pinned);
            opening += t.elapsed();
            let Connected { mut conn, local } = match dialled {
                Ok(c) => c,
                Err(e) => return Err(fail(e, ctl)),
            };
            if carries_token(sc.transport) {
                if let Err(e) = workload::send_all(conn.as_mut(), &token, sc.transport.framing()) {
                    return Err(fail(anyhow!(e).context("cannot send the run's token"), ctl));
                }
            }
            if i == 0 {
                link.endpoint = Some(ep.to_string());
                link.mss_bytes = conn.mss();
                if let Some((dev, mtu)) = transport::route_of(conn.as_ref()) {
                    link.route = Some(dev);
                    link.mtu_bytes = mtu;
                }
            }
            wired.endpoints.push(None);
            wired.locals.push(local);
            halves.push(Half::Dialled(conn));
        } else {
            match transport::listen(sc.transport, &opts, i) {
                Ok(l) => {
                    wired.endpoints.push(Some(l.endpoint().clone()));
                    wired.locals.push(None);
                    if i == 0 {
                        link.endpoint = Some(l.endpoint().to_string());
                    }
                    halves.push(Half::Listening(l));
                }
                Err(e) => return Err(fail(e, ctl)),
            }
        }
    }
    // connect: the listening role's side opens a listener, the other dials it.
    let mut dial_ends: Vec<Option<workload::Endpoint>> = Vec::new();
    if wiring == Wiring::ListenDial {
        for s in 0..sc.parallel as usize {
            let ep = if my_role == Role::Receiver {
                match connector::open(sc.transport, &opts, s, sc.extras.linger0) {
                    Ok((l, d, _)) => {
                        wired.endpoints.push(Some(d.endpoint()));
                        link.endpoint
                            .get_or_insert_with(|| d.endpoint().to_string());
                        workload::Endpoint::Listen(l)
                    }
                    Err(e) => return Err(fail(e, ctl)),
                }
            } else {
                let Some(Some(target)) = dial_endpoints.get(s) else {
                    return Err(fail(
                        anyhow!("the server gave no listener for stream {s}"),
                        ctl,
                    ));
                };
                link.endpoint.get_or_insert_with(|| target.to_string());
                let pinned = match trust.check(sc.transport, target, "the server's listener") {
                    Ok(p) => p,
                    Err(e) => return Err(fail(e, ctl)),
                };
                let dialer = Dialer::to(sc.transport, &pinned.endpoint, &opts, sc.extras.linger0);
                pins.push(pinned);
                match dialer {
                    Ok(d) => workload::Endpoint::Dial(Box::new(d)),
                    Err(e) => return Err(fail(e, ctl)),
                }
            };
            dial_ends.push(Some(ep));
        }
    }
    forge(&mut wired.endpoints);
    forge(&mut wired.locals);
    ctl.allow(&[FrameType::Wired, FrameType::Signal, FrameType::Error]);
    ctl.send(FrameType::Wired, &wired).map_err(control_err)?;
    let theirs: Wired = ctl
        .expect(FrameType::Wired, deadlines.step)
        .map_err(|e| match e {
            ControlError::Refused(why) => {
                RunError::Failed(anyhow!("the server could not set up the run: {why}"))
            }
            e => control_err(e),
        })?;
    let mut accepted = Vec::with_capacity(halves.len());
    for (i, h) in halves.into_iter().enumerate() {
        accepted.push(match h {
            Half::Listening(l) => {
                let peer = match theirs.locals.get(i).cloned().flatten() {
                    Some(ep) => {
                        match trust.check_own_end(
                            sc.transport,
                            &ep,
                            "the server's own socket",
                            Some(l.endpoint()),
                        ) {
                            Ok(p) => Some(p),
                            Err(e) => return Err(fail(e, ctl)),
                        }
                    }
                    None => None,
                };
                let t = Instant::now();
                let accepted = l.accept(peer.as_ref().map(|p| &p.endpoint));
                pins.extend(peer);
                opening += t.elapsed();
                match accepted {
                    Ok((c, info)) => {
                        link.sndbuf_bytes = link.sndbuf_bytes.or(info.sndbuf_bytes);
                        link.rcvbuf_bytes = link.rcvbuf_bytes.or(info.rcvbuf_bytes);
                        Half::Accepted(c)
                    }
                    Err(e) => return Err(fail(e, ctl)),
                }
            }
            other => other,
        });
    }
    // The server has answered this side's reply names (unix-dgram): they have done
    // their work, and the server cannot remove what it only pinned.
    for ep in wired.locals.iter().flatten() {
        if let Endpoint::Path(p) = ep {
            let _ = std::fs::remove_file(p);
        }
    }
    drop(side.dir.take()); // every name in it is gone already
    if wiring == Wiring::ListenDial && my_role == Role::Sender {
        if let Some(Some(ep)) = theirs.endpoints.first() {
            link.endpoint.get_or_insert_with(|| ep.to_string());
        }
    }
    let streams = my_roles.len();
    let sides: Vec<(Box<dyn Conn>, Option<workload::Endpoint>)> = if wiring == Wiring::ListenDial {
        dial_ends
            .into_iter()
            .map(|e| (transport::unconnected(), e))
            .collect()
    } else {
        ends(&channels, accepted, &my_roles)
            .into_iter()
            .map(|c| (c, None))
            .collect()
    };
    if link.route.is_none() && sc.transport.is_ip() {
        // connect makes its connections as it runs: they take the control connection's
        // path (the server binds the address the client reached it at).
        let route = ctl.stream().local_ip().zip(ctl.stream().peer_ip());
        if let Some((dev, mtu)) = route.and_then(|(l, p)| transport::route_between(l, p)) {
            link.route = Some(dev);
            link.mtu_bytes = mtu;
        }
    }
    let mut roles = LocalRoles::spawn(sc, stop, &my_roles, sides).map_err(|e| fail(e, ctl))?;
    if let Err(e) = roles.wait_ready(deadlines.step, deadlines.tick) {
        roles.abort();
        if interrupt::requested() {
            ctl.refuse("the client was interrupted (Ctrl-C)");
            return Err(RunError::Interrupted);
        }
        return Err(fail(e, ctl));
    }
    ctl.allow(&[FrameType::Signal, FrameType::Result, FrameType::Error]);
    ctl.send(FrameType::Start, &Start {}).map_err(control_err)?;
    roles.open();
    let limit = run_limit(
        stop,
        side.max_duration.saturating_add(deadlines.stall),
        deadlines.stall,
    ) + spec(sc.workload).set_up_allowance();
    match drive(ctl, &mut roles, sc, (limit, &deadlines), true)? {
        Ending::Interrupted => Err(RunError::Interrupted),
        Ending::Done(_, None) => Err(RunError::Failed(anyhow!("the server sent no result"))),
        Ending::Done(reports, Some(result)) => {
            roles.finish().map_err(RunError::Failed)?;
            Ok(ClientOutcome {
                reports,
                result,
                link,
                connect_time: opening / streams.max(1) as u32,
            })
        }
    }
}

/// What the server brings to a run.
pub struct ServerSide<'a> {
    /// Who the client is.
    pub peer: Peer,
    /// What this side knows of the client (found once per conversation): what it names
    /// passes these checks before it is used.
    pub trust: &'a PeerTrust,
    /// How long each step may take.
    pub deadlines: Deadlines,
    /// The longest a run may take.
    pub max_duration: Duration,
    /// This host's environment, for the result.
    pub environment: &'a crate::environment::Environment,
    /// The one port every TCP and UDP run takes its data on (`--data-port`), if any.
    pub data_port: Option<&'a DataPort>,
}

/// The data port a run of `kind` with `wiring` uses, if the server has one: IP
/// transports only.
///
/// # Errors
/// The `connect` workload, which makes a connection per exchange on ports the kernel
/// picks, over TCP.
fn data_port_for<'a>(
    side: &ServerSide<'a>,
    kind: TransportKind,
    wiring: Wiring,
) -> anyhow::Result<Option<&'a DataPort>> {
    let Some(dp) = side.data_port.filter(|_| kind.is_ip()) else {
        return Ok(None);
    };
    if wiring == Wiring::ListenDial {
        bail!(
            "this server takes test data on its --data-port {} only, and connect over {kind} makes a connection per exchange on ports the kernel picks: run it against a server without --data-port",
            dp.port()
        );
    }
    Ok(Some(dp))
}

/// The server's half of one run of `msg` (already checked). Returns this side's role
/// reports once the result is sent.
///
/// # Errors
/// Setup failing, the client going away or misbehaving, the run failing: the client has
/// been told why (when it can still hear it).
pub fn server_run(
    ctl: &mut Control,
    msg: &ScenarioMsg,
    side: &ServerSide<'_>,
    mut dir: Option<RunDir>,
) -> anyhow::Result<Vec<(Role, SideReport)>> {
    let sc = &msg.scenario;
    let role = msg.server_role;
    let role_of = msg.server_roles();
    let stop = sc.stop;
    let token = crate::control::auth::random(TOKEN_BYTES)?;
    let fail = |e: anyhow::Error, ctl: &mut Control| {
        ctl.refuse(&format!("{e:#}"));
        e
    };
    let bind = bind_for(sc.transport, ctl.stream().local_ip()).map_err(|e| fail(e, ctl))?;
    let mut opts = options(sc, dir.as_ref(), bind, side.deadlines.step);
    // A connection to the data port without the token (a stranger, a port scan, another
    // client's server dialling what its client named) is dropped, and the listener waits
    // on for the client's: it cannot make this run fail.
    if carries_token(sc.transport) {
        opts.token = Some(token.clone());
    }
    let channels = channels_of(sc, &role_of);
    let wiring = spec(sc.workload).wiring(sc.transport);
    let anonymous = matches!(
        sc.transport,
        TransportKind::Pipe | TransportKind::Socketpair
    );
    let data_port = data_port_for(side, sc.transport, wiring).map_err(|e| fail(e, ctl))?;
    let bind_ip = bind.map_or_else(|| bind_addr_default(sc.transport.is_ipv6()), |a| a.ip());
    // TCP: connections come through the data port's listener, routed here by the token.
    let mut on_port = data_port.filter(|_| carries_token(sc.transport)).map(|dp| {
        let peer = ctl.stream().peer_ip().map(canonical);
        dp.expect(&token, channels.len(), peer)
    });
    let mut ready = Ready {
        endpoints: Vec::new(),
        token: hex::encode(&token),
    };
    let mut halves: Vec<Option<Half>> = Vec::new();
    let mut connect_ends: Vec<Option<workload::Endpoint>> = Vec::new();
    if wiring == Wiring::ListenDial {
        if role == Role::Receiver {
            for s in 0..sc.parallel as usize {
                let (l, d, _) = connector::open(sc.transport, &opts, s, sc.extras.linger0)
                    .map_err(|e| fail(e, ctl))?;
                ready.endpoints.push(Some(d.endpoint()));
                connect_ends.push(Some(workload::Endpoint::Listen(l)));
            }
        }
    } else {
        for (i, ch) in channels.iter().enumerate() {
            let half = match (ch.server_listens && !anonymous, data_port) {
                (false, _) => None,
                (true, Some(dp)) if on_port.is_some() => {
                    let ep = dp.tcp_endpoint(bind_ip).map_err(|e| fail(e, ctl))?;
                    ready.endpoints.push(Some(Endpoint::Address(ep)));
                    halves.push(Some(Half::OnDataPort));
                    continue;
                }
                (true, Some(dp)) => {
                    let mut shared = opts.clone();
                    shared.bind = Some(SocketAddr::new(bind_ip, dp.port()));
                    let l = transport::listen_shared(sc.transport, &shared)
                        .map_err(|e| fail(e, ctl))?;
                    Some(l)
                }
                (true, None) => {
                    Some(transport::listen(sc.transport, &opts, i).map_err(|e| fail(e, ctl))?)
                }
            };
            ready
                .endpoints
                .push(half.as_ref().map(|l| l.endpoint().clone()));
            halves.push(half.map(Half::Listening));
        }
    }
    forge(&mut ready.endpoints);
    crate::testhooks::hold("server-ready");
    ctl.send(FrameType::Ready, &ready)?;
    let deadlines = side.deadlines;
    let theirs: Wired = ctl.expect(FrameType::Wired, deadlines.step)?;
    let control_peer = ctl.stream().peer_ip().map(canonical);
    // Nothing the client names is used unchecked; the checked files stay pinned (held
    // open) until the run is over.
    let trust = side.trust;
    let mut pins: Vec<Pinned> = Vec::new();
    // What the first accepted stream's transport granted (a queue's depth has no socket
    // to ask at the end of the run).
    let mut granted = LinkInfo::default();
    let mut conns = Vec::with_capacity(halves.len());
    for (i, (ch, h)) in channels.iter().zip(halves).enumerate() {
        let their_ep = theirs.endpoints.get(i).cloned().flatten();
        let their_local = theirs.locals.get(i).cloned().flatten();
        let half = match h {
            Some(Half::OnDataPort) => {
                let from = match &their_local {
                    Some(Endpoint::Address(a)) => Some(*a),
                    _ => None,
                };
                let expected = on_port.as_mut().expect("the run's registration");
                let (sock, _) = expected
                    .take(from, Instant::now() + deadlines.step)
                    .map_err(|e| fail(e, ctl))?;
                let c = transport::adopt_tcp(sock, &opts).map_err(|e| fail(e, ctl))?;
                if let (Some(got), Some(want)) = (peer_ip(c.as_ref()), control_peer) {
                    if got != want && !(got.is_loopback() && want.is_loopback()) {
                        return Err(fail(
                            anyhow!(
                                "a data connection came from {got}, not from the client at {want}"
                            ),
                            ctl,
                        ));
                    }
                }
                Half::Accepted(c)
            }
            Some(Half::Listening(_)) if data_port.is_some() && their_local.is_none() => {
                // An unconnected socket of the port's group would take anyone's datagrams.
                return Err(fail(
                    anyhow!("the client gave no UDP endpoint for channel {i}, and a server with --data-port connects each UDP socket to its peer"),
                    ctl,
                ));
            }
            Some(Half::Listening(l)) => {
                let peer = match &their_local {
                    Some(ep) => Some(
                        trust
                            .check_own_end(
                                sc.transport,
                                ep,
                                "the client's own socket",
                                Some(l.endpoint()),
                            )
                            .map_err(|e| fail(e, ctl))?,
                    ),
                    None => None,
                };
                let (mut c, info) = l
                    .accept(peer.as_ref().map(|p| &p.endpoint))
                    .map_err(|e| fail(e, ctl))?;
                granted.sndbuf_bytes = granted.sndbuf_bytes.or(info.sndbuf_bytes);
                granted.rcvbuf_bytes = granted.rcvbuf_bytes.or(info.rcvbuf_bytes);
                pins.extend(peer);
                if carries_token(sc.transport) {
                    check_token(&mut c, sc.transport, &token, deadlines.step)
                        .map_err(|e| fail(e, ctl))?;
                    if let (Some(got), Some(want)) = (peer_ip(c.as_ref()), control_peer) {
                        if got != want && !(got.is_loopback() && want.is_loopback()) {
                            return Err(fail(anyhow!("a data connection came from {got}, not from the client at {want}"), ctl));
                        }
                    }
                }
                Half::Accepted(c)
            }
            _ if anonymous => {
                if side.peer != Peer::Parent {
                    return Err(fail(
                        anyhow!("{} is only handed down to a child", sc.transport),
                        ctl,
                    ));
                }
                let fd = match &their_ep {
                    Some(Endpoint::Name(n)) => {
                        n.strip_prefix("fd:").and_then(|f| f.parse::<RawFd>().ok())
                    }
                    _ => None,
                };
                let Some(fd) =
                    fd.filter(|fd| nix::fcntl::fcntl(*fd, nix::fcntl::FcntlArg::F_GETFD).is_ok())
                else {
                    return Err(fail(anyhow!("channel {i}: no inherited descriptor"), ctl));
                };
                let conn = transport::inherited(
                    sc.transport,
                    crate::sys::own_fd(fd),
                    reads(ch, role_of[ch.stream]),
                )
                .map_err(|e| fail(e, ctl))?;
                Half::Inherited(conn)
            }
            _ => {
                let Some(ep) = their_ep else {
                    return Err(fail(
                        anyhow!("the client gave no endpoint for channel {i}"),
                        ctl,
                    ));
                };
                let pinned = trust
                    .check(sc.transport, &ep, "the client's endpoint")
                    .map_err(|e| fail(e, ctl))?;
                let mut checked = opts.clone();
                checked.peer_uid = pinned.owner;
                let c = transport::connect(sc.transport, &pinned.endpoint, &checked)
                    .with_context(|| {
                        format!("cannot reach the client's {} endpoint {ep}", sc.transport)
                    })
                    .map_err(|e| fail(e, ctl))?;
                pins.push(pinned);
                Half::Dialled(c.conn)
            }
        };
        conns.push(half);
    }
    drop(dir.take()); // every name in it is gone already
    drop(on_port.take()); // every connection came: later ones with the token are dropped
    let mut wired = Wired::default();
    let sides: Vec<(Box<dyn Conn>, Option<workload::Endpoint>)> = if wiring == Wiring::ListenDial {
        if role == Role::Sender {
            for s in 0..sc.parallel as usize {
                let Some(Some(target)) = theirs.endpoints.get(s) else {
                    return Err(fail(
                        anyhow!("the client gave no listener for stream {s}"),
                        ctl,
                    ));
                };
                let pinned = trust
                    .check(sc.transport, target, "the client's listener")
                    .map_err(|e| fail(e, ctl))?;
                let d = Dialer::to(sc.transport, &pinned.endpoint, &opts, sc.extras.linger0)
                    .map_err(|e| fail(e, ctl))?;
                pins.push(pinned);
                connect_ends.push(Some(workload::Endpoint::Dial(Box::new(d))));
            }
        }
        connect_ends
            .into_iter()
            .map(|e| (transport::unconnected(), e))
            .collect()
    } else {
        ends(&channels, conns, &role_of)
            .into_iter()
            .map(|c| (c, None))
            .collect()
    };
    let mut roles = LocalRoles::spawn(sc, stop, &role_of, sides).map_err(|e| fail(e, ctl))?;
    if let Err(e) = roles.wait_ready(deadlines.step, deadlines.tick) {
        roles.abort();
        return Err(fail(e, ctl));
    }
    wired.endpoints.clear();
    crate::testhooks::hold("server-wired");
    ctl.send(FrameType::Wired, &wired)?;
    let start: Result<Start, ControlError> = ctl.expect(FrameType::Start, deadlines.step);
    if let Err(e) = start {
        roles.abort();
        return Err(e.into());
    }
    let t0 = crate::measure::cpu::SystemTicks::now();
    let udp6 = sc.transport == TransportKind::Udp6;
    let udp_before = (!sc.transport.reliable())
        .then(|| crate::measure::netstat::udp_rcvbuf_errors(udp6))
        .flatten();
    roles.open();
    let ending = drive(
        ctl,
        &mut roles,
        sc,
        (
            run_limit(stop, side.max_duration, deadlines.stall)
                + spec(sc.workload).set_up_allowance(),
            &deadlines,
        ),
        false,
    );
    let reports = match ending {
        Ok(Ending::Done(r, _)) => r,
        Ok(Ending::Interrupted) => bail!("interrupted"),
        Err(RunError::Interrupted) => bail!("interrupted"),
        // The client has been told why: a refusal is the last frame it gets.
        Err(RunError::Failed(e)) => return Err(e),
    };
    // A role's signal sent as it ended goes before the result.
    let _ = roles.forward(ctl);
    let t1 = crate::measure::cpu::SystemTicks::now();
    let udp_drops = udp_before
        .zip(crate::measure::netstat::udp_rcvbuf_errors(udp6))
        .map(|(a, b)| b.saturating_sub(a));
    let reports = match roles.finish() {
        Ok(_) => reports,
        Err(e) => return Err(fail(e, ctl)),
    };
    let mut link = LinkInfo::default();
    if let Some((_, r)) = reports.first() {
        link.sndbuf_bytes = r.socket_buffers.0.or(granted.sndbuf_bytes);
        link.rcvbuf_bytes = r.socket_buffers.1.or(granted.rcvbuf_bytes);
    }
    let result = RunResult {
        sides: reports.iter().map(|(_, r)| WireSide::from(r)).collect(),
        roles: reports.iter().map(|(role, _)| *role).collect(),
        link,
        system: t0
            .zip(t1)
            .and_then(|(a, b)| crate::measure::cpu::SystemCpu::between(&a, &b)),
        udp_drops,
        environment: side.environment.clone(),
    };
    crate::testhooks::hold("server-result");
    ctl.send(FrameType::Result, &result)?;
    Ok(reports)
}

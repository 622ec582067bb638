//! The other role on a `sockbench server` (`--server HOST[:PORT]`), or in a child
//! sockbench (`--placement processes`): this process plays one role of every stream over
//! a control connection, and both sides' reports come back as one run's [`Roles`].

use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use super::split::{client_run, ClientOutcome, ClientSide};
use super::trust::PeerTrust;
use super::{Placement, RunError};
use crate::control::auth::Key;
use crate::control::client::{dial, handshake, Interrupted};
use crate::control::frame::FrameType;
use crate::control::messages::{channels_of, server_roles, Bye, Welcome};
use crate::control::wire::{clean, WireSide};
use crate::control::{Control, Deadlines};
use crate::environment::Environment;
use crate::figures::{implausible, run_figures};
use crate::measure::cpu::{SystemCpu, SystemTicks};
use crate::scenario::Scenario;
use crate::scenario::Stop;
use crate::transport::RunDir;
use crate::transport::{Conn, TransportKind, TransportOptions};
use crate::vocab::Role;
use crate::workload::{PeerInfo, Roles, SideReport};

/// Where the other role runs.
enum Peer {
    /// A server at this address (as given).
    Server(String),
    /// A child of this process, started for each run.
    Child,
}

/// A control connection to a server, handshake done, and what this side found out about
/// the process behind it (once, for every run over it).
struct Conversation {
    ctl: Control,
    trust: PeerTrust,
    /// The server's --max-duration, as its welcome said.
    max_duration: Duration,
}

impl Conversation {
    fn new(ctl: Control, welcome: &Welcome) -> Conversation {
        let trust = PeerTrust::of(ctl.stream().addrs());
        Conversation {
            ctl,
            trust,
            max_duration: Duration::from_secs(welcome.limits.max_duration_s),
        }
    }
}

/// The other role in another process.
pub struct Remote {
    peer: Peer,
    key: Option<Key>,
    server_role: Role,
    bidir: bool,
    path: Option<PathBuf>,
    deadlines: Deadlines,
    conversation: Mutex<Option<Conversation>>,
    environment: Mutex<Option<Environment>>,
}

impl Remote {
    /// The other role on the server at `target`, which plays `server_role`.
    pub fn server(
        target: String,
        key: Option<Key>,
        server_role: Role,
        path: Option<PathBuf>,
    ) -> Remote {
        Remote {
            peer: Peer::Server(target),
            key,
            server_role,
            bidir: false,
            path,
            deadlines: Deadlines::default(),
            conversation: Mutex::new(None),
            environment: Mutex::new(None),
        }
    }

    /// The other role (`child_role`) in a child process started for each run.
    pub fn child(path: Option<PathBuf>, child_role: Role) -> Remote {
        Remote {
            peer: Peer::Child,
            key: None,
            server_role: child_role,
            bidir: false,
            path,
            deadlines: Deadlines::default(),
            conversation: Mutex::new(None),
            environment: Mutex::new(None),
        }
    }

    /// Runs over `ctl` (handshake done), whose peer is known as `trust`, with `deadlines`:
    /// what [`Placement::run`] then does is what it does after dialling the server.
    #[cfg(test)]
    pub(crate) fn over(
        self,
        (ctl, welcome): (Control, &Welcome),
        trust: PeerTrust,
        deadlines: Deadlines,
    ) -> Remote {
        *self.conversation.lock().unwrap_or_else(|e| e.into_inner()) = Some(Conversation {
            trust,
            ..Conversation::new(ctl, welcome)
        });
        Remote { deadlines, ..self }
    }

    /// Both directions at once (`--bidir`): each stream also runs the other way.
    pub fn both_ways(mut self, bidir: bool) -> Remote {
        self.bidir = bidir;
        self
    }

    /// Whether both directions run at once.
    pub fn bidir(&self) -> bool {
        self.bidir
    }

    /// The role the other process plays.
    pub fn other_role(&self) -> Role {
        self.server_role
    }

    /// The server as given (None for a child).
    pub fn target(&self) -> Option<&str> {
        match &self.peer {
            Peer::Server(t) => Some(t),
            Peer::Child => None,
        }
    }

    /// The server's environment, once a run has brought it.
    pub fn peer_environment(&self) -> Option<Environment> {
        self.environment
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn run_on_server(
        &self,
        target: &str,
        sc: &Scenario,
        stop: Stop,
    ) -> Result<(ClientOutcome, Option<SystemCpu>), RunError> {
        let mut guard = self.conversation.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let (ctl, welcome) = dial(target, self.key.as_ref()).map_err(|e| {
                match e.downcast_ref::<Interrupted>().is_some() || crate::interrupt::requested() {
                    true => RunError::Interrupted,
                    false => RunError::Failed(e),
                }
            })?;
            *guard = Some(Conversation::new(ctl, &welcome));
        }
        let c = guard.as_mut().expect("connected");
        let dir = open_dir(sc, self.path.as_ref())?;
        let side = ClientSide {
            trust: &c.trust,
            deadlines: self.deadlines,
            max_duration: c.max_duration,
            dir,
            inherited: Vec::new(),
        };
        let outcome = self.timed_run(&mut c.ctl, sc, stop, side);
        if outcome.is_err() {
            // The conversation may be mid-run: start the next run on a new one.
            *guard = None;
        }
        outcome
    }

    /// This side's half of one run over `ctl`, with this machine's CPU over it.
    fn timed_run(
        &self,
        ctl: &mut Control,
        sc: &Scenario,
        stop: Stop,
        side: ClientSide<'_>,
    ) -> Result<(ClientOutcome, Option<SystemCpu>), RunError> {
        ctl.finish_frames_within(side.deadlines.step);
        let t0 = SystemTicks::now();
        let o = client_run(ctl, sc, stop, self.server_role, self.bidir, side)?;
        let t1 = SystemTicks::now();
        Ok((o, t0.zip(t1).and_then(|(a, b)| SystemCpu::between(&a, &b))))
    }

    fn run_in_child(
        &self,
        sc: &Scenario,
        stop: Stop,
    ) -> Result<(ClientOutcome, Option<SystemCpu>), RunError> {
        let dir = open_dir(sc, self.path.as_ref())?;
        let (mine, theirs) = UnixStream::pair().map_err(|e| {
            RunError::Failed(anyhow!(e).context("cannot make the control socket pair"))
        })?;
        // Anonymous transports: both ends made here, the child's handed down.
        // (this side's end, the child's end, its descriptor)
        type Handed = (Box<dyn Conn>, Box<dyn Conn>, RawFd);
        let mut inherited: Vec<Handed> = Vec::new();
        if matches!(
            sc.transport,
            TransportKind::Pipe | TransportKind::Socketpair
        ) {
            let opts = TransportOptions {
                sndbuf: sc.sndbuf.map(|n| n as usize),
                rcvbuf: sc.rcvbuf.map(|n| n as usize),
                message_bytes: sc.size as usize,
                ..TransportOptions::default()
            };
            let child_roles = server_roles(sc.parallel as usize, self.server_role, self.bidir);
            for ch in channels_of(sc, &child_roles) {
                let pair = crate::transport::open_pair(sc.transport, &opts, 0)
                    .map_err(RunError::Failed)?;
                // The child reads a channel whose data flows to its role.
                let child_reads = (child_roles[ch.stream] == Role::Receiver) == ch.forward;
                let (child_end, my_end) =
                    if child_reads || sc.transport == TransportKind::Socketpair {
                        (pair.receiver, pair.sender)
                    } else {
                        (pair.sender, pair.receiver)
                    };
                let fd = child_end
                    .raw_fd()
                    .ok_or_else(|| RunError::Failed(anyhow!("an end without a descriptor")))?;
                inherited.push((my_end, child_end, fd));
            }
        }
        let mut child = spawn_child(&theirs, inherited.iter().map(|i| i.2), self.path.as_ref())
            .map_err(RunError::Failed)?;
        crate::interrupt::pass_on_to(Some(child.id()));
        drop(theirs);
        let mut handed = Vec::new();
        for (mine_end, child_end, fd) in inherited {
            drop(child_end); // the child has its own copy now
            handed.push((mine_end, fd));
        }
        let mut ctl = Control::new(Box::new(mine));
        // Over an inherited socket: the child is this program, and nothing it names is
        // checked.
        let trust = PeerTrust::of(None);
        let outcome = (|| {
            let welcome = handshake(&mut ctl, None).map_err(RunError::Failed)?;
            let side = ClientSide {
                trust: &trust,
                deadlines: self.deadlines,
                max_duration: Duration::from_secs(welcome.limits.max_duration_s),
                dir,
                inherited: handed,
            };
            let done = self.timed_run(&mut ctl, sc, stop, side)?;
            let _ = ctl.send(FrameType::Bye, &Bye {});
            Ok(done)
        })();
        drop(ctl);
        crate::interrupt::pass_on_to(None);
        reap(&mut child);
        outcome
    }
}

/// A private directory for this side's names (client-side listeners of one-way
/// transports, Unix `connect` listeners), for transports that have file-system names.
fn open_dir(sc: &Scenario, user: Option<&PathBuf>) -> Result<Option<RunDir>, RunError> {
    if !sc.transport.uses_path() {
        return Ok(None);
    }
    RunDir::open(user).map(Some).map_err(RunError::Failed)
}

/// Start a child sockbench that serves one conversation on `control` (and owns the
/// handed-down descriptors `fds`).
fn spawn_child(
    control: &UnixStream,
    fds: impl Iterator<Item = RawFd>,
    path: Option<&PathBuf>,
) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("cannot find this program to start a child")?;
    let cfd = control.as_raw_fd();
    let mut handed = vec![cfd];
    handed.extend(fds);
    for &fd in &handed {
        inheritable(fd, true)?;
    }
    let mut cmd = Command::new(exe);
    cmd.arg("peer").arg("--control-fd").arg(cfd.to_string());
    if let Some(p) = path {
        cmd.arg("--path").arg(p);
    }
    let spawned = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start a child sockbench");
    for &fd in &handed {
        let _ = inheritable(fd, false);
    }
    spawned
}

/// Clear (or set back) close-on-exec on `fd`, so a child inherits it.
fn inheritable(fd: RawFd, inherit: bool) -> anyhow::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let flags = if inherit {
        FdFlag::empty()
    } else {
        FdFlag::FD_CLOEXEC
    };
    fcntl(fd, FcntlArg::F_SETFD(flags)).context("cannot hand a descriptor to the child")?;
    Ok(())
}

/// How long a child gets to end after Ctrl-C (it was told, and removes what it made)
/// before it is killed.
const CHILD_INTERRUPT_GRACE: Duration = Duration::from_millis(40);

/// Wait for the child (it ends when the conversation does); kill it if it lingers. After
/// Ctrl-C the child is interrupted too, as a terminal's Ctrl-C would (its whole process
/// group), and waited for only briefly.
fn reap(child: &mut Child) {
    let mut until = Instant::now() + Duration::from_secs(2);
    if crate::interrupt::requested() {
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGINT,
            );
        }
        until = Instant::now() + CHILD_INTERRUPT_GRACE;
    }
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) if Instant::now() > until => {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

impl Placement for Remote {
    fn name(&self) -> &'static str {
        match self.peer {
            Peer::Server(_) => "server",
            Peer::Child => "processes",
        }
    }

    fn run(&self, sc: &Scenario, stop: Stop) -> Result<Roles, RunError> {
        if crate::interrupt::requested() {
            return Err(RunError::Interrupted);
        }
        // UDP drops are counted by the receiving host's kernel: here when this side
        // receives.
        let udp6 = sc.transport == TransportKind::Udp6;
        let count_here = !sc.transport.reliable() && self.server_role == Role::Sender;
        let udp_before = count_here
            .then(|| crate::measure::netstat::udp_rcvbuf_errors(udp6))
            .flatten();
        let ran = match &self.peer {
            Peer::Server(t) => self.run_on_server(t, sc, stop),
            Peer::Child => self.run_in_child(sc, stop),
        };
        let (o, system) = match ran {
            Ok(r) => r,
            // A step cut short by Ctrl-C (a dial, an accept, a wait for the peer) is the
            // interruption, not a failure of the run.
            Err(RunError::Failed(_)) if crate::interrupt::requested() => {
                return Err(RunError::Interrupted)
            }
            Err(e) => return Err(e),
        };
        let udp_here = udp_before
            .zip(crate::measure::netstat::udp_rcvbuf_errors(udp6))
            .map(|(a, b)| b.saturating_sub(a));
        let theirs = o
            .result
            .sides
            .iter()
            .cloned()
            .map(WireSide::into_side)
            .collect::<Result<Vec<SideReport>, _>>()
            .map_err(|e| RunError::Failed(anyhow!(e)))?;
        if theirs.len() != o.reports.len() || o.result.roles.len() != theirs.len() {
            return Err(RunError::Failed(anyhow!(
                "the peer reported {} streams, this side ran {}",
                theirs.len(),
                o.reports.len()
            )));
        }
        // Each of its sides in a role this run gave it (the order is the order they ended).
        let mut asked = server_roles(sc.parallel as usize, self.server_role, self.bidir);
        let mut told = o.result.roles.clone();
        asked.sort_by_key(|r| *r == Role::Sender);
        told.sort_by_key(|r| *r == Role::Sender);
        if asked != told {
            return Err(RunError::Failed(anyhow!(
                "the peer reported its streams in roles this run did not give it: is it a sockbench server of this release?"
            )));
        }
        let theirs: Vec<(Role, SideReport)> = o.result.roles.iter().copied().zip(theirs).collect();
        let environment = peer_environment(&o.result.environment);
        *self.environment.lock().unwrap_or_else(|e| e.into_inner()) = Some(environment.clone());
        let server_receives = self.server_role == Role::Receiver;
        // Each direction: who sends there and who receives.
        let split = |of: &[(Role, SideReport)], role: Role| -> Vec<SideReport> {
            of.iter()
                .filter(|(r, _)| *r == role)
                .map(|(_, s)| s.clone())
                .collect()
        };
        let directions = if self.bidir {
            let one_way = |senders: Vec<SideReport>, receivers: Vec<SideReport>| Roles {
                senders,
                receivers,
                ..Roles::default()
            };
            vec![
                (
                    "client to server".to_string(),
                    one_way(
                        split(&o.reports, Role::Sender),
                        split(&theirs, Role::Receiver),
                    ),
                ),
                (
                    "server to client".to_string(),
                    one_way(
                        split(&theirs, Role::Sender),
                        split(&o.reports, Role::Receiver),
                    ),
                ),
            ]
        } else {
            Vec::new()
        };
        let mut senders = split(&o.reports, Role::Sender);
        senders.extend(split(&theirs, Role::Sender));
        let mut receivers = split(&o.reports, Role::Receiver);
        receivers.extend(split(&theirs, Role::Receiver));
        // A run Ctrl-C cut short comes back with what both sides measured, their roles
        // saying so.
        // What the server's transport granted where no socket says it (a queue the
        // server made: its depth may be capped by the server's own fs.mqueue.msg_max),
        // held to the same bound as the server's other counts.
        let served = |b: Option<u64>| b.filter(|&n| n <= crate::control::wire::MAX_COUNT);
        let mut link = o.link;
        link.sndbuf_bytes = senders
            .first()
            .and_then(|s| s.socket_buffers.0)
            .or(link.sndbuf_bytes)
            .or(served(o.result.link.sndbuf_bytes));
        link.rcvbuf_bytes = receivers
            .first()
            .and_then(|r| r.socket_buffers.1)
            .or(link.rcvbuf_bytes)
            .or(served(o.result.link.rcvbuf_bytes));
        let _ = std::io::stderr().flush();
        let roles = Roles {
            senders,
            receivers,
            system,
            link,
            // Both ways, each host counts its own drops (and on one host, both count the
            // same ones): no figure can be attributed to the run.
            udp_drops: match (self.bidir, server_receives) {
                (true, _) => None,
                (false, true) => o.result.udp_drops,
                (false, false) => udp_here,
            },
            directions,
            connect_time: o.connect_time,
            peer: Some(PeerInfo {
                system: o.result.system,
                environment,
            }),
        };
        // A figure no measurement gives (in range count by count, beyond any link or
        // clock together) means the peer measured nothing: the run is refused, not shown.
        if let Some(what) = implausible(&run_figures(sc, &roles)) {
            return Err(RunError::Failed(anyhow!(
                "the peer reported what no measurement gives ({what}): the run is refused (is it a sockbench server of this release, and the one you meant?)"
            )));
        }
        Ok(roles)
    }
}

/// Most sysctls a peer's environment may name (sockbench reads about a dozen).
const MAX_SYSCTLS: usize = 64;

/// A peer's environment made safe to keep and print: its text without control characters
/// and cut short, at most [`MAX_SYSCTLS`] sysctls.
fn peer_environment(e: &Environment) -> Environment {
    Environment {
        kernel: clean(&e.kernel, 200),
        hostname: clean(&e.hostname, 100),
        cpu_model: e.cpu_model.as_deref().map(|m| clean(m, 200)),
        cpus: e.cpus,
        governor: e.governor.as_deref().map(|g| clean(g, 50)),
        sysctls: e
            .sysctls
            .iter()
            .take(MAX_SYSCTLS)
            .map(|(k, v)| (clean(k, 100), v.as_deref().map(|t| clean(t, 200))))
            .collect(),
    }
}

#[cfg(test)]
mod session_fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 28: a server's sysctl names went into the client's report raw (an escape
    /// sequence reached the terminal through `report`), and as many as it liked.
    #[test]
    fn a_servers_environment_loses_its_control_characters_and_most_of_its_sysctls() {
        let mut sysctls: std::collections::BTreeMap<String, Option<String>> = (0..1000)
            .map(|i| (format!("sysctl.{i:04}"), Some("1".to_string())))
            .collect();
        sysctls.insert("a.\u{1b}[31mred".into(), Some("\u{7}".into()));
        let e = peer_environment(&Environment {
            kernel: "\u{1b}]0;title\u{7}Linux".into(),
            hostname: "h\r\n".repeat(100),
            cpu_model: Some("\u{9b}1m".into()),
            cpus: 2,
            governor: Some("\u{1b}[5m".into()),
            sysctls,
        });
        assert_eq!(e.sysctls.len(), MAX_SYSCTLS);
        let texts = [
            Some(&e.kernel),
            Some(&e.hostname),
            e.cpu_model.as_ref(),
            e.governor.as_ref(),
        ];
        let sysctls = e.sysctls.iter().flat_map(|(k, v)| [Some(k), v.as_ref()]);
        for t in texts.into_iter().chain(sysctls).flatten() {
            assert!(!t.chars().any(char::is_control), "{t:?}");
        }
        assert!(
            e.sysctls.contains_key("a.\\x1b[31mred"),
            "{:?}",
            e.sysctls.keys().next()
        );
    }
}

#[cfg(test)]
mod fuzz {
    //! The client's handshake against a hostile server: random scripts of frames (valid
    //! and random bodies of every type, and raw bytes) answer its hello. It never panics,
    //! ends when the script does (no hang), never takes a frame over its type's cap, and
    //! never accepts a server that did not prove the key it was given.

    use super::*;
    use crate::control::frame::encode;
    use crate::control::messages::Limits;
    use crate::control::VERSION;
    use proptest::prelude::*;
    use std::io::{self, Read, Write};
    use std::net::IpAddr;

    /// A server that says what its script says, then hangs up.
    struct Scripted(io::Cursor<Vec<u8>>);

    impl Read for Scripted {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.0.read(b)
        }
    }

    impl Write for Scripted {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl crate::control::Stream for Scripted {
        fn set_read_timeout(&self, _: Option<std::time::Duration>) -> io::Result<()> {
            Ok(())
        }
        fn peer_ip(&self) -> Option<IpAddr> {
            None
        }
        fn local_ip(&self) -> Option<IpAddr> {
            None
        }
        fn shutdown(&self) {}
    }

    fn welcome(key_required: bool) -> Vec<u8> {
        serde_json::to_vec(&Welcome {
            version: VERSION,
            tool: "hostile".into(),
            nonce: "ab".repeat(32),
            key_required,
            limits: Limits::default(),
        })
        .unwrap()
    }

    fn any_frame() -> impl Strategy<Value = Vec<u8>> {
        let kinds = proptest::sample::select(FrameType::ALL.to_vec());
        let body = prop_oneof![
            Just(welcome(false)),
            Just(welcome(true)),
            Just(br#"{"mac":"00"}"#.to_vec()),
            Just(br#"{"message":"go away"}"#.to_vec()),
            proptest::collection::vec(any::<u8>(), 0..300),
        ];
        (kinds, body).prop_map(|(k, b)| encode(k, &b).unwrap_or_default())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(500),
            failure_persistence: None,
            .. ProptestConfig::default()
        })]
        #[test]
        fn a_hostile_server_never_makes_the_handshake_panic_hang_or_skip_the_key(
            frames in proptest::collection::vec(any_frame(), 0..6),
            raw in proptest::collection::vec(any::<u8>(), 0..64),
            raw_first in any::<bool>(),
            keyed in any::<bool>(),
        ) {
            let mut script = Vec::new();
            if raw_first {
                script.extend_from_slice(&raw);
            }
            for f in &frames {
                script.extend_from_slice(f);
            }
            if !raw_first {
                script.extend_from_slice(&raw);
            }
            let key = keyed.then(|| Key::new(b"fuzzing key 0123456789").unwrap());
            let mut ctl = Control::new(Box::new(Scripted(io::Cursor::new(script))));
            let t = std::time::Instant::now();
            let r = handshake(&mut ctl, key.as_ref());
            // The script ends: so does the handshake, at once (no deadline waited out).
            prop_assert!(t.elapsed() < std::time::Duration::from_secs(1));
            if let Ok(w) = &r {
                // Only a real welcome is taken; with a key, no script can forge the proof.
                prop_assert!(!keyed, "a server without the key was accepted");
                prop_assert!(!w.key_required);
                prop_assert_eq!(w.version, VERSION);
            }
        }
    }
}

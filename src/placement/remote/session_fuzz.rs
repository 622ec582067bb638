//! The client's whole session against a hostile server, a million times
//! (`bench/fuzz_control.sh`). A scripted server plays its part honestly (the handshake,
//! with and without a key, then one or two runs: `Ready`, `Wired`, its data, its signals,
//! its `Result`) over loopback, and breaks one step of it ([`Break`]): a frame of the
//! wrong type for the step, cut short, announced over its cap, garbage, a JSON leaf that
//! lies, a lie only that frame can tell (an endpoint it should not be trusted with, a
//! token that is no token, figures no measurement gives, a stream that does not exist),
//! a hang-up, or silence. Its data connections can be closed early, fed garbage or held
//! open silently too.
//!
//! The client is the real one: `handshake` (as `dial` runs it), then `Placement::run` on
//! a `Remote` over that conversation, which is what `--server` runs after dialling
//! (`client_run`, the merge of both sides, the checks of the server's figures). Its
//! deadlines are shortened ([`Deadlines`]), and its trust in the server is what
//! `PeerTrust::of` finds for a connection this process holds both ends of (this process).
//!
//! For every session: no panic; the client returns within its deadlines (a silent server
//! is given up on, never waited for); an honest session fails only for lack of time;
//! what the client accepts passes the plausibility checks (`measure::units::plausible`)
//! and carries no control character; nothing a decoy stands for ([`Decoys`]: names and
//! addresses no trust check lets through) was opened, connected to or written; and past
//! the handshake the client never holds more of the server's frames than the largest one
//! a run takes (a result).

use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};

use std::os::unix::net::UnixListener;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::json;

use super::Remote;
use crate::control::auth::{self, Key, NONCE_BYTES};
use crate::control::client::handshake;
use crate::control::frame::{self, Frame, FrameType};
use crate::control::fuzzing::{
    broken, deadlines, drain, fill, framed, hang_up, hostile_values, loopback, ready, run_sessions,
    After, Break, DataEnd, Decoys, Stats, Watch, Watched,
};
use crate::control::messages::{
    channels_of, Hello, Limits, Ready, RunResult, ScenarioMsg, Welcome, Wired,
};
use crate::control::wire::{WireSide, MAX_COUNT};
use crate::control::{Control, VERSION};
use crate::environment::Environment;
use crate::placement::trust::PeerTrust;
use crate::placement::{Placement, RunError};
use crate::scenario::Scenario;
use crate::scenario::Stop;
use crate::transport::{Endpoint, LinkInfo, TransportKind};
use crate::vocab::units::plausible;
use crate::vocab::Role;
use crate::workload::Roles;

/// What the server does at each step of a run, in order.
const STEPS: usize = 5;
const READY: usize = 0;
const WIRED: usize = 1;
const SIGNALS: usize = 3;
const RESULT: usize = 4;

/// One session.
#[derive(Clone, Debug)]
struct Case {
    keyed: bool,
    transport: TransportKind,
    server_role: Role,
    bidir: bool,
    parallel: u32,
    size: u64,
    stop: Stop,
    runs: usize,
    /// The step broken, counted over the runs (past the last: none).
    at: usize,
    how: Break,
}

fn any_break() -> impl Strategy<Value = Break> {
    let kinds = proptest::sample::select(FrameType::ALL.to_vec());
    let values = proptest::sample::select(hostile_values());
    prop_oneof![
        1 => Just(Break::Close),
        1 => Just(Break::Silence),
        2 => kinds.clone().prop_map(Break::Retype),
        2 => kinds.clone().prop_map(Break::Before),
        1 => Just(Break::Twice),
        1 => (0usize..200, any::<bool>()).prop_map(|(keep, close)| Break::Cut { keep, close }),
        1 => (kinds.clone(), any::<bool>(), 0usize..64).prop_map(|(k, over, send)| Break::Announce {
            kind: k as u8,
            // Over the type's cap, or within it and more than will ever come.
            len: if over { k.cap() as u32 + 1 } else { k.cap() as u32 },
            send,
        }),
        1 => (0u8..=255, 0u32..=u32::MAX, 0usize..64).prop_map(|(kind, len, send)| Break::Announce { kind, len, send }),
        2 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(Break::Garbage),
        1 => proptest::collection::vec(any::<u8>(), 1..40).prop_map(Break::Noise),
        5 => (0usize..400, values).prop_map(|(leaf, with)| Break::Lie { leaf, with }),
        6 => (0usize..10_000).prop_map(Break::Named),
    ]
}

fn any_case() -> impl Strategy<Value = Case> {
    let transport = proptest::sample::select(vec![
        TransportKind::Tcp,
        TransportKind::Unix,
        TransportKind::Fifo,
    ]);
    // Mostly runs of a count (short, and their end waits on the result alone), some of a
    // time (their end waits on the clock too); mostly one run; a step broken in most.
    let stop = prop_oneof![
        4 => (1u64..=8).prop_map(Stop::Count),
        1 => Just(Stop::Duration(Duration::from_millis(1))),
    ];
    let runs = prop_oneof![3 => Just(1usize), 1 => Just(2usize)];
    let at = prop_oneof![9 => (0usize..10_000).prop_map(Some), 1 => Just(None)];
    (
        (any::<bool>(), transport, any::<bool>(), any::<bool>()),
        (1u32..=2, 1u64..=4096, stop),
        runs,
        at,
        any_break(),
    )
        .prop_map(
            |((keyed, transport, sends, bidir), (parallel, size, stop), runs, at, how)| Case {
                keyed,
                transport,
                server_role: if sends { Role::Sender } else { Role::Receiver },
                bidir,
                parallel,
                size,
                stop,
                runs,
                // None: an honest session.
                at: at.map_or(usize::MAX, |at| at % (STEPS * runs)),
                how,
            },
        )
}

fn key() -> Key {
    Key::new(b"the fuzzed sessions' shared key").unwrap()
}

/// Where the server listens for one channel: the listener and what it names.
enum Listening {
    Tcp(TcpListener),
    Unix(UnixListener, std::path::PathBuf),
    Fifo(std::fs::File, std::path::PathBuf),
    /// Named, and no longer listened on: a FIFO without its reader, a socket file whose
    /// socket is closed (or nothing, for TCP).
    Gone(Option<std::path::PathBuf>),
}

impl Listening {
    /// The name kept, the listening end closed.
    fn orphan(mut self) -> Listening {
        let path = match &mut self {
            Listening::Unix(_, p) | Listening::Fifo(_, p) => Some(std::mem::take(p)),
            _ => None,
        };
        Listening::Gone(path)
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        match self {
            Listening::Unix(_, p) | Listening::Fifo(_, p) | Listening::Gone(Some(p)) => {
                let _ = std::fs::remove_file(p);
            }
            Listening::Tcp(_) | Listening::Gone(None) => {}
        }
    }
}

fn listen(kind: TransportKind, decoys: &Decoys, n: u64) -> io::Result<(Listening, Endpoint)> {
    match kind {
        TransportKind::Tcp => {
            let l = TcpListener::bind("127.0.0.1:0")?;
            l.set_nonblocking(true)?;
            let at = l.local_addr()?;
            Ok((Listening::Tcp(l), Endpoint::Address(at)))
        }
        TransportKind::Unix => {
            let p = decoys.name("unix", n);
            let _ = std::fs::remove_file(&p);
            let l = UnixListener::bind(&p)?;
            l.set_nonblocking(true)?;
            Ok((Listening::Unix(l, p.clone()), Endpoint::Path(p)))
        }
        _ => {
            let p = decoys.name("fifo", n);
            let _ = std::fs::remove_file(&p);
            nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
            let fd = nix::fcntl::open(
                &p,
                nix::fcntl::OFlag::O_RDONLY
                    | nix::fcntl::OFlag::O_NONBLOCK
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )?;
            let f = std::fs::File::from(crate::sys::own_fd(fd));
            Ok((Listening::Fifo(f, p.clone()), Endpoint::Path(p)))
        }
    }
}

/// The connection the client made to `l` (its token read), by `until`.
fn accept(l: Listening, until: Instant) -> Option<DataEnd> {
    let mut end = match &l {
        Listening::Tcp(t) => loop {
            match t.accept() {
                Ok((s, _)) => break DataEnd::Tcp(s),
                Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_micros(50)),
                Err(_) => return None,
            }
        },
        Listening::Unix(u, _) => loop {
            match u.accept() {
                Ok((s, _)) => break DataEnd::Unix(s),
                Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_micros(50)),
                Err(_) => return None,
            }
        },
        Listening::Fifo(f, _) => return f.try_clone().ok().map(DataEnd::Fifo),
        Listening::Gone(_) => return None,
    };
    if let DataEnd::Tcp(s) = &end {
        s.set_nonblocking(true).ok()?;
    }
    if let DataEnd::Unix(s) = &end {
        s.set_nonblocking(true).ok()?;
    }
    let mut token = [0u8; crate::placement::split::TOKEN_BYTES];
    let mut got = 0;
    while got < token.len() && ready(end.fd(), true, until) {
        match end.read(&mut token[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return None,
        }
    }
    Some(end)
}

/// Open the FIFO the client named for this server's data (the client reads it).
fn open_theirs(ep: Option<&Endpoint>) -> Option<DataEnd> {
    let Some(Endpoint::Path(p)) = ep else {
        return None;
    };
    let fd = nix::fcntl::open(
        p,
        nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    Some(DataEnd::Fifo(std::fs::File::from(crate::sys::own_fd(fd))))
}

/// The scripted server: its control end, what it has sent, and when it fell silent.
struct Script<'a> {
    case: &'a Case,
    decoys: &'a Decoys,
    sock: TcpStream,
    /// Steps taken so far (over the runs).
    step: usize,
    silent_at: Option<Instant>,
    until: Instant,
    serial: u64,
}

/// Why the script stopped.
enum Stopped {
    /// The client hung up, refused or broke off (or the script broke its own session).
    Over,
}

type Go<T> = Result<T, Stopped>;

impl Script<'_> {
    fn read(&mut self) -> Go<Frame> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Stopped::Over);
        }
        let _ = self.sock.set_read_timeout(Some(left));
        let r = frame::read_frame(&mut self.sock);

        match r {
            Ok(f) if f.kind == FrameType::Error => Err(Stopped::Over),
            Ok(f) => Ok(f),
            Err(_) => Err(Stopped::Over),
        }
    }

    /// The next frame of `kind` (signals skipped, as the server skips them).
    fn expect(&mut self, kind: FrameType) -> Go<Frame> {
        loop {
            let f = self.read()?;
            if f.kind == FrameType::Signal && kind != FrameType::Signal {
                continue;
            }
            return if f.kind == kind {
                Ok(f)
            } else {
                Err(Stopped::Over)
            };
        }
    }

    fn raw(&mut self, bytes: &[u8]) -> Go<()> {
        self.sock.write_all(bytes).map_err(|_| Stopped::Over)
    }

    /// Whether the step due is the one to break.
    fn breaking(&self) -> bool {
        self.step == self.case.at
    }

    /// Send the frame of this step, broken if it is the one; the step is then over.
    fn send(&mut self, kind: FrameType, body: &serde_json::Value) -> Go<()> {
        let breaking = self.breaking();
        self.step += 1;
        self.send_as(kind, body, breaking)
    }

    /// Send a frame, broken (`breaking`) as the case says.
    fn send_as(&mut self, kind: FrameType, body: &serde_json::Value, breaking: bool) -> Go<()> {
        let body = serde_json::to_vec(body).expect("JSON");
        if !breaking {
            return self.raw(&framed(kind as u8, &body));
        }
        let (bytes, after) = broken(kind, &body, &self.case.how);
        self.raw(&bytes)?;
        self.after(after)
    }

    fn after(&mut self, after: After) -> Go<()> {
        match after {
            After::Go => Ok(()),
            After::Close => {
                hang_up(&self.sock);
                Err(Stopped::Over)
            }
            After::Silence => {
                self.silent_at = Some(Instant::now());
                Err(Stopped::Over)
            }
        }
    }

    /// The whole session, as far as it goes.
    fn serve(&mut self, key: Option<&Key>) -> Go<()> {
        let hello: Hello = serde_json::from_slice(&self.read()?.body).map_err(|_| Stopped::Over)?;
        let client_nonce = auth::nonce_bytes(&hello.nonce).ok_or(Stopped::Over)?;
        let nonce = auth::random(NONCE_BYTES).map_err(|_| Stopped::Over)?;
        let welcome = Welcome {
            version: VERSION,
            tool: "hostile".into(),
            nonce: hex::encode(&nonce),
            key_required: key.is_some(),
            limits: Limits {
                max_duration_s: 1,
                ..Limits::default()
            },
        };
        self.raw(&framed(
            FrameType::Welcome as u8,
            &serde_json::to_vec(&welcome).unwrap(),
        ))?;
        if let Some(key) = key {
            let _proof = self.expect(FrameType::Auth)?;
            let answer = json!({ "mac": key.server_proof(&nonce, &client_nonce) });
            self.raw(&framed(
                FrameType::Auth as u8,
                &serde_json::to_vec(&answer).unwrap(),
            ))?;
        }
        for _ in 0..self.case.runs {
            self.run()?;
        }
        // The client hangs up when it is done (its last signals may come first).
        while self.read().is_ok() {}
        Err(Stopped::Over)
    }

    /// One run, as an honest server plays it, but for the step broken.
    fn run(&mut self) -> Go<()> {
        let msg: ScenarioMsg = serde_json::from_slice(&self.expect(FrameType::Scenario)?.body)
            .map_err(|_| Stopped::Over)?;
        let sc = &msg.scenario;
        let roles = msg.server_roles();
        let channels = channels_of(sc, &roles);
        let mut listening = Vec::new();
        let mut endpoints = Vec::new();
        for ch in &channels {
            if ch.server_listens {
                self.serial += 1;
                let (l, ep) =
                    listen(sc.transport, self.decoys, self.serial).map_err(|_| Stopped::Over)?;
                listening.push(Some(l));
                endpoints.push(Some(ep));
            } else {
                listening.push(None);
                endpoints.push(None);
            }
        }
        let token =
            auth::random(crate::placement::split::TOKEN_BYTES).map_err(|_| Stopped::Over)?;
        let mut ready = serde_json::to_value(Ready {
            endpoints,
            token: hex::encode(token),
        })
        .unwrap();
        if self.breaking() {
            if let Break::Named(n) = self.case.how {
                if n % 9 == 8 {
                    // Its own names, no longer listened on.
                    listening = listening
                        .into_iter()
                        .map(|l| l.map(Listening::orphan))
                        .collect();
                } else {
                    lie_ready(&mut ready, n, self.decoys);
                }
            }
        }
        self.send(FrameType::Ready, &ready)?;
        let theirs: Wired = serde_json::from_slice(&self.expect(FrameType::Wired)?.body)
            .map_err(|_| Stopped::Over)?;
        let mut ends: Vec<Option<DataEnd>> = Vec::new();
        for (i, l) in listening.into_iter().enumerate() {
            ends.push(match l {
                Some(l) => accept(l, self.until),
                None => open_theirs(theirs.endpoints.get(i).and_then(|e| e.as_ref())),
            });
        }
        let mut wired = json!({ "endpoints": [], "locals": [] });
        if self.breaking() {
            if let Break::Named(n) = self.case.how {
                let d = self.decoys.endpoints();
                let ep = serde_json::to_value(&d[n % d.len()]).unwrap();
                wired = json!({ "endpoints": vec![ep.clone(); channels.len()], "locals": vec![ep; channels.len()] });
            }
        }
        self.send(FrameType::Wired, &wired)?;
        let _start = self.expect(FrameType::Start)?;
        let started = Instant::now();
        // The data: senders first (a little, then the end), then what the client sends.
        let mut counted = vec![0u64; roles.len()];
        let data_break = self.breaking().then(|| self.case.how.clone());
        self.step += 1;
        let payload = vec![0x5Au8; (sc.size as usize * 4).min(16 << 10)];
        let mut by_stream: Vec<Option<DataEnd>> = (0..roles.len()).map(|_| None).collect();
        for (ch, end) in channels.iter().zip(ends) {
            by_stream[ch.stream] = end;
        }
        match data_break {
            Some(Break::Close) => {
                by_stream.drain(..).flatten().for_each(DataEnd::close);
            }
            Some(Break::Silence) if sc.transport != TransportKind::Fifo => {
                // Held open, silent, until the client gives up on the run.
                let until =
                    (Instant::now() + deadlines().stall * 4 + run_time(sc.stop)).min(self.until);
                while Instant::now() < until {
                    std::thread::sleep(Duration::from_micros(500));
                }
                by_stream.drain(..).flatten().for_each(DataEnd::close);
            }
            other => {
                let garbage = match other {
                    Some(Break::Garbage(g)) | Some(Break::Noise(g)) => Some(g),
                    _ => None,
                };
                for (i, role) in roles.iter().enumerate() {
                    if *role == Role::Sender {
                        if let Some(mut end) = by_stream[i].take() {
                            counted[i] =
                                fill(&mut end, garbage.as_deref().unwrap_or(&payload), self.until);
                            end.close();
                        }
                    }
                }
                for (i, role) in roles.iter().enumerate() {
                    if *role == Role::Receiver {
                        if let Some(mut end) = by_stream[i].take() {
                            counted[i] = drain(&mut end, self.until);
                            end.close();
                        }
                    }
                }
            }
        }
        let elapsed = started.elapsed();
        let mut signals: Vec<serde_json::Value> = roles
            .iter()
            .enumerate()
            .map(|(i, r)| json!({ "stream": i, "sender_done": *r == Role::Sender }))
            .collect();
        let signal_break = self.breaking();
        if signal_break {
            if let Break::Named(n) = self.case.how {
                let stream = [u64::from(u32::MAX), roles.len() as u64, 1 << 40][n % 3];
                signals = vec![json!({ "stream": stream, "sender_done": n % 2 == 0 })];
            }
        }
        // One step, however many signals: broken on its first.
        self.step += 1;
        for (k, s) in signals.iter().enumerate() {
            self.send_as(FrameType::Signal, s, k == 0 && signal_break)?;
        }
        let sides: Vec<WireSide> = roles
            .iter()
            .zip(&counted)
            .map(|(_, &bytes)| WireSide {
                bytes,
                messages: bytes.div_ceil(sc.size.max(1)),
                elapsed_ns: Some(elapsed.as_nanos().max(1000) as u64),
                ..WireSide::default()
            })
            .collect();
        let mut result = serde_json::to_value(RunResult {
            sides,
            roles: roles.clone(),
            link: LinkInfo::default(),
            system: None,
            udp_drops: None,
            environment: environment(),
        })
        .unwrap();
        if self.breaking() {
            if let Break::Named(n) = self.case.how {
                lie_result(&mut result, n);
            }
        }
        self.send(FrameType::Result, &result)
    }
}

/// How long a run of `stop` lasts, planned.
fn run_time(stop: Stop) -> Duration {
    match stop {
        Stop::Duration(d) => d,
        _ => Duration::ZERO,
    }
}

fn environment() -> Environment {
    Environment {
        kernel: "Linux 6.1.0".into(),
        hostname: "hostile".into(),
        cpu_model: None,
        cpus: 2,
        governor: None,
        sysctls: Default::default(),
    }
}

/// The lies a `Ready` can tell: endpoints no check lets through, one too many or too few,
/// a token that is no token.
fn lie_ready(ready: &mut serde_json::Value, n: usize, decoys: &Decoys) {
    let d = decoys.endpoints();
    let decoy = serde_json::to_value(&d[(n / 8) % d.len()]).unwrap();
    let eps = ready["endpoints"].as_array_mut().expect("endpoints");
    match n % 9 {
        0..=2 => eps.iter_mut().for_each(|e| *e = decoy.clone()),
        3 => eps.push(decoy),
        4 => {
            eps.pop();
        }
        5 => ready["token"] = json!("zz"),
        6 => ready["token"] = json!(""),
        _ => ready["token"] = json!("ab".repeat(30_000)),
    }
}

/// The lies a `Result` can tell: figures no measurement gives (in range for each count
/// on its own), sides and roles that do not match the run, text that is no text.
fn lie_result(result: &mut serde_json::Value, n: usize) {
    let sides = result["sides"].as_array_mut().expect("sides");
    let every = |sides: &mut Vec<serde_json::Value>, field: &str, v: serde_json::Value| {
        for s in sides.iter_mut() {
            s[field] = v.clone();
        }
    };
    match n % 16 {
        0 => {
            every(sides, "bytes", json!(MAX_COUNT));
            every(sides, "elapsed_ns", json!(1000));
        }
        1 => {
            every(sides, "messages", json!(MAX_COUNT));
            every(sides, "elapsed_ns", json!(1000));
        }
        2 => every(
            sides,
            "latencies",
            json!([[
                "round_trip",
                [[3_600_000_000_000_000u64, 1], [1000, MAX_COUNT]]
            ]]),
        ),
        3 => every(
            sides,
            "latencies",
            json!([["round_trip", [[4_000_000_000_000u64, 3]]]]),
        ),
        4 => {
            sides.push(sides.first().cloned().unwrap_or(json!({})));
        }
        5 => {
            let roles = result["roles"].as_array_mut().expect("roles");
            for r in roles.iter_mut() {
                *r = if *r == json!("sender") {
                    json!("receiver")
                } else {
                    json!("sender")
                };
            }
        }
        6 => {
            result["system"] = json!({
                "cpu_user_seconds": 1e300, "cpu_system_seconds": 1.0, "cpu_interrupt_seconds": 0.0,
                "cpu_busy_seconds": 1e300, "utilization": 7.5
            })
        }
        7 => {
            result["system"] = json!({
                "cpu_user_seconds": -1.0, "cpu_system_seconds": -5.0, "cpu_interrupt_seconds": -0.5,
                "cpu_busy_seconds": -6.5, "utilization": -1.0
            })
        }
        8 => result["udp_drops"] = json!(u64::MAX),
        9 => {
            let env = &mut result["environment"];
            env["kernel"] = json!("\u{1b}]0;owned\u{7}Linux\u{1b}[2J");
            env["hostname"] = json!("h\r\nost".repeat(500));
            env["cpu_model"] = json!("\u{9b}31m");
            env["governor"] = json!("\u{1b}[5m");
            env["sysctls"] = json!({ "net.\u{1b}[31mcore": "1\u{7}", "x": null });
        }
        10 => {
            let many: serde_json::Map<String, serde_json::Value> = (0..20_000)
                .map(|i| (format!("sysctl.{i}"), json!("1")))
                .collect();
            result["environment"]["sysctls"] = serde_json::Value::Object(many);
        }
        11 => every(sides, "start_delay_ns", json!(u64::MAX)),
        12 => {
            every(sides, "timeouts", json!(MAX_COUNT));
            every(sides, "late", json!(MAX_COUNT));
            every(sides, "sequence", json!([MAX_COUNT, MAX_COUNT]));
        }
        13 => every(sides, "on_cpu", json!([u32::MAX, u32::MAX])),
        14 => every(sides, "cpu", json!([u64::MAX, 1, 2, 3, 4])),
        _ => {
            every(sides, "bytes", json!(MAX_COUNT));
            every(sides, "elapsed_ns", json!(null));
            result["roles"] = json!([]);
        }
    }
}

/// What the session gave.
struct Outcome {
    runs: Vec<Result<Roles, String>>,
    panicked: Option<String>,
}

/// A stream over `kind`, as planned from its command line.
fn scenario(kind: TransportKind) -> Scenario {
    crate::plan::first_scenario(&["stream", "-t", &kind.to_string(), "-d", "1"])
}

/// Run one session; Err names what broke a promise.
fn session(case: &Case, decoys: &Arc<Decoys>, sc: &Scenario) -> Result<(), TestCaseError> {
    let (mine, theirs) = loopback();
    // No return by then is a hang (a silent server is held to a tighter bound below);
    // roles are given 2 s to end once their run is abandoned.
    let bound = (deadlines().step * 6 + deadlines().stall + run_time(case.stop)) * case.runs as u32
        + Duration::from_secs(if cfg!(debug_assertions) { 8 } else { 5 });
    let started = Instant::now();
    let until = started + bound;
    let key = case.keyed.then(key);
    // The server.
    let script_sock = theirs.try_clone().expect("clone");
    let (quiet_tx, quiet_rx) = mpsc::channel::<()>();
    let server = {
        let case = case.clone();
        let key = key.clone();
        let decoys = Arc::clone(decoys);
        std::thread::spawn(move || {
            let mut s = Script {
                case: &case,
                decoys: &decoys,
                sock: script_sock,
                step: 0,
                silent_at: None,
                until,
                serial: 0,
            };
            let _ = s.serve(key.as_ref());
            if s.silent_at.is_some() {
                // Silent, connections held, until the client has given up.
                let _ = quiet_rx.recv_timeout(until.saturating_duration_since(Instant::now()));
            }
            hang_up(&s.sock);
            s.silent_at
        })
    };
    // The client, in a thread of its own: a hang is reported, not waited for.
    let watch = Arc::new(Watch::default());
    let (done_tx, done_rx) = mpsc::channel();
    let client = {
        let watch = Arc::clone(&watch);
        let case = case.clone();
        let sc = sc.clone();
        let mine_keep = mine.try_clone().expect("clone");
        let key = key.clone();
        std::thread::spawn(move || {
            let addrs = (
                mine_keep.peer_addr().expect("peer"),
                mine_keep.local_addr().expect("local"),
            );
            let mut ctl = Control::new(Box::new(Watched::client(mine, Arc::clone(&watch))));
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let welcome = match handshake(&mut ctl, key.as_ref()) {
                    Ok(w) => w,
                    Err(e) => return vec![Err(format!("handshake: {e:#}"))],
                };
                watch.establish();
                let trust = PeerTrust::of_known(
                    addrs,
                    nix::unistd::geteuid().as_raw(),
                    vec![std::process::id() as i32],
                );
                let remote = Remote::server("fuzzed".into(), key, case.server_role, None)
                    .both_ways(case.bidir)
                    .over((ctl, &welcome), trust, deadlines());
                let mut runs = Vec::new();
                for _ in 0..case.runs {
                    let t = Instant::now();
                    let r = remote.run(&sc, sc.stop);
                    if std::env::var_os("SBTX").is_some() {
                        eprintln!("run took {:?}", t.elapsed());
                    }
                    let failed = r.is_err();
                    runs.push(r.map_err(|e| match e {
                        RunError::Interrupted => "interrupted".to_string(),
                        RunError::Failed(e) => format!("{e:#}"),
                    }));
                    if failed {
                        // A second run would dial the server anew.
                        break;
                    }
                }
                runs
            }));
            hang_up(&mine_keep);
            let _ = done_tx.send((outcome, Instant::now()));
        })
    };
    let got = done_rx.recv_timeout(bound);
    let t_ret = started.elapsed();
    let _ = quiet_tx.send(());
    hang_up(&theirs);
    let (outcome, returned) = match got {
        Ok((Ok(runs), at)) => (
            Outcome {
                runs,
                panicked: None,
            },
            at,
        ),
        Ok((Err(p), at)) => (
            Outcome {
                runs: Vec::new(),
                panicked: Some(
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default(),
                ),
            },
            at,
        ),
        Err(_) => {
            return Err(TestCaseError::fail(format!(
                "the client hung: no return within {bound:?}"
            )))
        }
    };
    let _ = client.join();
    let t_cj = started.elapsed();
    let silent_at = server.join().unwrap_or(None);
    let t_sj = started.elapsed();
    if std::env::var_os("SBTX").is_some() {
        eprintln!("returned {t_ret:?} client joined {t_cj:?} server joined {t_sj:?}");
    }
    if let Some(p) = outcome.panicked {
        return Err(TestCaseError::fail(format!("the client panicked: {p}")));
    }
    if let Some(at) = silent_at {
        let d = deadlines();
        let most = d.step.max(d.stall + run_time(case.stop)) * 2
            + d.stall * 2
            + Duration::from_millis(if cfg!(debug_assertions) { 2000 } else { 500 });
        let waited = returned.saturating_duration_since(at);
        if waited > most {
            return Err(TestCaseError::fail(format!(
                "the server fell silent and the client waited {waited:?} (its deadlines allow {most:?})"
            )));
        }
    }
    if let Some(what) = decoys.touched() {
        return Err(TestCaseError::fail(what));
    }
    // Past the handshake, never more held than a run's largest frame (a result) and
    // what one read brings.
    let most = FrameType::Result.cap() + (16 << 10);
    for (established, held, cap) in watch.notes() {
        if established && (cap > FrameType::Result.cap() || held > most) {
            return Err(TestCaseError::fail(format!(
                "the client held {held} bytes of the server's frames and would take {cap} (a result is at most {})",
                FrameType::Result.cap()
            )));
        }
    }
    let honest = case.at >= STEPS * case.runs;
    let streams = case.parallel as usize * if case.bidir { 2 } else { 1 };
    for r in &outcome.runs {
        match r {
            Ok(roles) if roles.senders.len() != streams || roles.receivers.len() != streams => {
                return Err(TestCaseError::fail(format!(
                    "accepted a run of {streams} streams with {} senders and {} receivers",
                    roles.senders.len(),
                    roles.receivers.len()
                )))
            }
            Ok(roles) => plausible(sc, roles)?,
            Err(e) if honest && !timing(e) => {
                return Err(TestCaseError::fail(format!(
                    "an honest server's session failed: {e}"
                )))
            }
            Err(_) => {}
        }
    }
    Ok(())
}

/// Whether `e` says a step ran out of time (all an honest session may fail of).
fn timing(e: &str) -> bool {
    [
        "sent nothing for",
        "not ready within",
        "stalled",
        "within",
        "timed out",
        "Resource temporarily unavailable",
    ]
    .iter()
    .any(|w| e.contains(w))
}

/// What an accepted run must be: figures a measurement can give, text without control
/// characters.
fn plausible(sc: &Scenario, roles: &Roles) -> Result<(), TestCaseError> {
    let f = crate::figures::run_figures(sc, roles);
    let within = |what: &str, v: f64, most: f64| {
        if v.is_finite() && (0.0..=most).contains(&v) {
            Ok(())
        } else {
            Err(TestCaseError::fail(format!(
                "accepted {what} = {v:e} (at most {most:e})"
            )))
        }
    };
    within(
        "bits per second",
        f.bits_per_second,
        plausible::BITS_PER_SECOND,
    )?;
    within(
        "messages per second",
        f.messages_per_second,
        plausible::PER_SECOND,
    )?;
    within(
        "sender messages per second",
        f.sender.messages_per_second,
        plausible::PER_SECOND,
    )?;
    within(
        "receiver messages per second",
        f.receiver.messages_per_second,
        plausible::PER_SECOND,
    )?;
    for d in &f.directions {
        within(
            "a direction's bits per second",
            d.bits_per_second,
            plausible::BITS_PER_SECOND,
        )?;
    }
    for (what, n) in [
        ("messages sent", Some(f.messages_sent)),
        ("messages received", Some(f.messages_received)),
        ("messages lost", f.messages_lost),
        ("UDP drops", f.udp_receive_buffer_errors),
        ("messages reordered", f.messages_reordered),
        ("messages duplicated", f.messages_duplicated),
    ] {
        within(what, n.unwrap_or(0) as f64, plausible::COUNT as f64)?;
    }
    for (kind, l) in &f.latencies {
        within(kind.name(), l.max_ns as f64, plausible::LATENCY_NS)?;
        within(kind.name(), l.count as f64, plausible::COUNT as f64)?;
    }
    if let Some(s) = &f.server_system {
        for v in [
            s.cpu_user_seconds,
            s.cpu_system_seconds,
            s.cpu_interrupt_seconds,
            s.cpu_busy_seconds,
        ] {
            within("the server's CPU seconds", v, plausible::CPU_SECONDS)?;
        }
        within("the server's CPU utilization", s.utilization, 1.0)?;
    }
    if let Some(p) = &roles.peer {
        let e = &p.environment;
        let texts = [
            Some(&e.kernel),
            Some(&e.hostname),
            e.cpu_model.as_ref(),
            e.governor.as_ref(),
        ];
        let sysctls = e.sysctls.iter().flat_map(|(k, v)| [Some(k), v.as_ref()]);
        for t in texts.into_iter().chain(sysctls).flatten() {
            if t.chars().any(char::is_control) {
                return Err(TestCaseError::fail(format!(
                    "accepted the server's text {t:?}"
                )));
            }
        }
        if e.sysctls.len() > 256 {
            return Err(TestCaseError::fail(format!(
                "accepted {} sysctls from the server",
                e.sysctls.len()
            )));
        }
    }
    Ok(())
}

/// A million sessions with `PROPTEST_CASES=1000000` (`bench/fuzz_control.sh`); a few
/// hundred in the test suite.
#[test]
fn a_hostile_server_never_makes_a_session_panic_hang_trust_it_or_report_the_impossible() {
    // Scenarios are planned once (a plan per session would cost more than the session).
    let planned: Vec<(TransportKind, Scenario)> =
        [TransportKind::Tcp, TransportKind::Unix, TransportKind::Fifo]
            .into_iter()
            .map(|t| (t, scenario(t)))
            .collect();
    let stats = Stats::from_env();
    run_sessions(
        any_case,
        || Arc::new(Decoys::new()),
        |decoys, case| {
            let base = planned.iter().find(|p| p.0 == case.transport);
            let mut sc = base.expect("planned").1.clone();
            sc.size = case.size;
            sc.parallel = case.parallel;
            sc.stop = case.stop;
            let t = Instant::now();
            let r = session(&case, decoys, &sc);
            stats.add(
                || match case.at < STEPS * case.runs {
                    true => format!("{} at {}", case.how.name(), case.at % STEPS),
                    false => "honest".into(),
                },
                t.elapsed(),
            );
            r
        },
    );
}

/// Sessions this target once failed (issue 28, "a fuzz target over the server's and
/// client's state machines"), each kept as a regression test.
/// See: the commit that added this target.
#[test]
fn sessions_that_once_broke_the_client_no_longer_do() {
    let decoys = Arc::new(Decoys::new());
    let case = |transport, at, how| Case {
        keyed: false,
        transport,
        server_role: Role::Receiver,
        bidir: false,
        parallel: 1,
        size: 64,
        stop: Stop::Count(4),
        runs: 1,
        at,
        how,
    };
    let report = Break::Announce {
        kind: FrameType::Report as u8,
        len: 8 << 20,
        send: 64,
    };
    let cases = [
        // Every count in range, 9e21 bit/s together: shown as measured.
        case(TransportKind::Tcp, RESULT, Break::Named(0)),
        // Its streams in roles it was not given: merged as if they were.
        case(TransportKind::Tcp, RESULT, Break::Named(5)),
        // Escape sequences in its sysctl names, and 20000 of them: kept as they came.
        case(TransportKind::Tcp, RESULT, Break::Named(9)),
        case(TransportKind::Tcp, RESULT, Break::Named(10)),
        // Silent once the client's roles had ended a run of a count: waited for forever.
        case(TransportKind::Tcp, SIGNALS, Break::Silence),
        case(TransportKind::Unix, RESULT, Break::Silence),
        // A FIFO it named and did not read: the client waited in open() forever.
        case(TransportKind::Fifo, READY, Break::Named(8)),
        // An agent's 8 MiB report in the middle of a run: taken, and held.
        case(TransportKind::Tcp, READY, report.clone()),
        case(TransportKind::Tcp, WIRED, report),
    ];
    for c in cases {
        let mut sc = scenario(c.transport);
        sc.size = c.size;
        sc.stop = c.stop;
        if let Err(e) = session(&c, &decoys, &sc) {
            panic!("{e}\n{c:#?}");
        }
    }
}

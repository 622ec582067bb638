//! The server's whole session against a hostile client, a million times
//! (`bench/fuzz_control.sh`). A scripted client plays its part honestly over loopback
//! (hello, its proof when the server has a key, one or two runs: the scenario, its
//! data connections and `Wired`, start, its data, its signals; then goodbye) and breaks
//! one or two steps of it ([`Break`]): a frame of the wrong type for the step, cut short,
//! a header over its cap or of a frame this state does not take, garbage, a JSON leaf
//! that lies, a lie only that frame can tell (another protocol version, a wrong proof, a
//! scenario over the limits or of a transport the server must refuse, endpoints and
//! answering ends no trust check lets through, a stream that does not exist), a
//! hang-up, or silence. Its data can be cut short, garbage or withheld.
//!
//! The server is the real one: the conversation `sockbench server` holds with each client
//! (`converse`: the `Session` state machine, the decoder with the frames each state
//! takes, the deadlines, and for each run `server_run` with what it does with the
//! client's `Wired`, its start and its signals, and the result it sends). Its deadlines
//! are shortened, and its trust in the client is what `PeerTrust::of` finds for a
//! connection this process holds both ends of (this process).
//!
//! For every session: no panic; the conversation ends within its deadlines (every step
//! the client takes gets an answer, a run, an end or a refusal; silence is not waited
//! for); a refusal is the server's last frame and the connection closes after it; before
//! the handshake is over the server holds no more of the client's frames than the
//! handshake's (4 KiB), after it no more than a scenario's (64 KiB), never an agent's
//! report; nothing a decoy stands for was opened, connected to or written; an honest
//! session fails only for lack of time; and the process's threads and descriptors stay
//! bounded over the million.

use std::io::{self, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::json;

use super::{converse, Shared};
use crate::control::auth::{self, Key, NONCE_BYTES};
use crate::control::frame::{self, Frame, FrameType};
use crate::control::fuzzing::{
    broken, deadlines, drain, fill, framed, hang_up, hostile_values, loopback, run_sessions, step,
    After, Break, DataEnd, Decoys, Stats, Watch, Watched,
};
use crate::control::messages::{channels_of, Limits, Ready, ScenarioMsg, Welcome, Wired};
use crate::control::{Control, VERSION};
use crate::placement::trust::PeerTrust;
use crate::scenario::Scenario;
use crate::scenario::Stop;
use crate::transport::{Endpoint, TransportKind};
use crate::vocab::Peer;
use crate::vocab::Role;

/// The client's steps in a run, in order (after hello and, with a key, its proof).
const RUN_STEPS: usize = 5;

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
    /// The steps broken (counted over the session: hello 0, the proof 1 with a key, then
    /// each run's scenario, `Wired`, start, data and signals, then goodbye) and how.
    breaks: Vec<(usize, Break)>,
}

impl Case {
    /// How many steps the session has.
    fn steps(&self) -> usize {
        1 + usize::from(self.keyed) + RUN_STEPS * self.runs + 1
    }
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
        2 => (kinds.clone(), any::<bool>(), 0usize..64).prop_map(|(k, over, send)| Break::Announce {
            kind: k as u8,
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
    // Mostly runs of a count, some of a time; mostly one run; one step broken in most
    // sessions, two in some, none in a few.
    let stop = prop_oneof![
        4 => (1u64..=8).prop_map(Stop::Count),
        1 => Just(Stop::Duration(Duration::from_millis(1))),
    ];
    let runs = prop_oneof![3 => Just(1usize), 1 => Just(2usize)];
    let breaks = prop_oneof![
        1 => Just(Vec::new()),
        7 => proptest::collection::vec((0usize..10_000, any_break()), 1),
        2 => proptest::collection::vec((0usize..10_000, any_break()), 2),
    ];
    (
        (any::<bool>(), transport, any::<bool>(), any::<bool>()),
        (1u32..=2, 1u64..=4096, stop),
        runs,
        breaks,
    )
        .prop_map(
            |((keyed, transport, sends, bidir), (parallel, size, stop), runs, breaks)| {
                let mut case = Case {
                    keyed,
                    transport,
                    server_role: if sends { Role::Sender } else { Role::Receiver },
                    bidir,
                    parallel,
                    size,
                    stop,
                    runs,
                    breaks,
                };
                let steps = case.steps();
                for b in &mut case.breaks {
                    b.0 %= steps;
                }
                case
            },
        )
}

fn key() -> Key {
    Key::new(b"the fuzzed sessions' shared key").unwrap()
}

/// The scripted client: its control end, what the server sent it, and when it fell
/// silent.
struct Script<'a> {
    case: &'a Case,
    decoys: &'a Decoys,
    sc: &'a Scenario,
    sock: TcpStream,
    step: usize,
    /// The type of every frame the server sent, in order.
    got: Vec<FrameType>,
    silent_at: Option<Instant>,
    /// This run's scenario named another transport than the one the script plays.
    lied_transport: bool,
    /// This run has started (its `Start` sent) and not ended.
    running: bool,
    /// The script fell silent in a run of another transport than the server's, whose
    /// roles so never saw the script's data end: the server cannot tell that silence
    /// from a count-bounded run still going, and waits for its --max-duration.
    silent_unseen: bool,
    until: Instant,
    serial: u64,
}

/// The script is over: the server refused, hung up, or the script broke its session.
struct Over;

type Go<T> = Result<T, Over>;

impl Script<'_> {
    fn read(&mut self) -> Go<Frame> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Over);
        }
        let _ = self.sock.set_read_timeout(Some(left));
        let f = frame::read_frame(&mut self.sock).map_err(|_| Over)?;
        self.got.push(f.kind);
        if f.kind == FrameType::Error {
            return Err(Over);
        }
        Ok(f)
    }

    /// The next frame of `kind` (the server's signals skipped).
    fn expect(&mut self, kind: FrameType) -> Go<Frame> {
        loop {
            let f = self.read()?;
            if f.kind == FrameType::Signal && kind != FrameType::Signal {
                continue;
            }
            return if f.kind == kind { Ok(f) } else { Err(Over) };
        }
    }

    fn raw(&mut self, bytes: &[u8]) -> Go<()> {
        self.sock.write_all(bytes).map_err(|_| Over)
    }

    /// How the step due is broken, if it is; the step is then taken.
    fn take_step(&mut self) -> Option<Break> {
        let at = self.step;
        self.step += 1;
        self.case
            .breaks
            .iter()
            .find(|(s, _)| *s == at)
            .map(|(_, b)| b.clone())
    }

    /// Send this step's frame, broken as the case says.
    fn send(&mut self, kind: FrameType, body: &serde_json::Value, how: Option<&Break>) -> Go<()> {
        let body = serde_json::to_vec(body).expect("JSON");
        let Some(how) = how else {
            return self.raw(&framed(kind as u8, &body));
        };
        let (bytes, after) = broken(kind, &body, how);
        self.raw(&bytes)?;
        match after {
            After::Go => Ok(()),
            After::Close => {
                hang_up(&self.sock);
                Err(Over)
            }
            After::Silence => {
                self.silent_at = Some(Instant::now());
                self.silent_unseen = self.running && self.lied_transport;
                Err(Over)
            }
        }
    }

    /// The whole session, as far as it goes.
    fn play(&mut self, key: Option<&Key>) -> Go<()> {
        let nonce = auth::random(NONCE_BYTES).map_err(|_| Over)?;
        let mut hello =
            json!({ "version": VERSION, "tool": "hostile", "nonce": hex::encode(&nonce) });
        let how = self.take_step();
        if let Some(Break::Named(n)) = how {
            match n % 4 {
                0 => hello["version"] = json!(VERSION + 1),
                1 => hello["nonce"] = json!("abcd"),
                2 => hello["nonce"] = json!("zz".repeat(32)),
                _ => hello["tool"] = json!("t".repeat(2000)),
            }
        }
        self.send(FrameType::Hello, &hello, how.as_ref())?;
        let welcome: Welcome =
            serde_json::from_slice(&self.expect(FrameType::Welcome)?.body).map_err(|_| Over)?;
        if let Some(key) = key {
            let theirs = auth::nonce_bytes(&welcome.nonce).ok_or(Over)?;
            let mut proof = json!({ "mac": key.client_proof(&nonce, &theirs) });
            let how = self.take_step();
            if let Some(Break::Named(n)) = how {
                proof["mac"] = match n % 3 {
                    0 => json!(key.client_proof(&theirs, &nonce)),
                    1 => json!(""),
                    _ => json!(key.server_proof(&theirs, &nonce)),
                };
            }
            self.send(FrameType::Auth, &proof, how.as_ref())?;
            self.expect(FrameType::Auth)?;
        }
        for _ in 0..self.case.runs {
            self.run()?;
        }
        let how = self.take_step();
        let bye = match how {
            Some(Break::Named(_)) => json!({ "farewell": true }),
            _ => json!({}),
        };
        self.send(FrameType::Bye, &bye, how.as_ref())?;
        // The server hangs up.
        while self.read().is_ok() {}
        Ok(())
    }

    /// One run, as an honest client plays it, but for the steps broken.
    fn run(&mut self) -> Go<()> {
        let sc = self.sc;
        let msg = ScenarioMsg {
            scenario: sc.clone(),
            server_role: self.case.server_role,
            bidir: self.case.bidir,
        };
        let roles = msg.server_roles();
        let mut body = serde_json::to_value(&msg).expect("JSON");
        let how = self.take_step();
        self.lied_transport = false;
        if let Some(Break::Named(n)) = how {
            lie_scenario(&mut body, n);
            self.lied_transport = body["scenario"]["transport"] != json!(sc.transport);
        }
        self.send(FrameType::Scenario, &body, how.as_ref())?;
        let ready: Ready =
            serde_json::from_slice(&self.expect(FrameType::Ready)?.body).map_err(|_| Over)?;
        let token = hex::decode(&ready.token).map_err(|_| Over)?;
        // The data connections: dialled (a socket's token first), or a FIFO of this side.
        let channels = channels_of(sc, &roles);
        let mut ends: Vec<Option<DataEnd>> = Vec::new();
        let mut endpoints = Vec::new();
        for (i, ch) in channels.iter().enumerate() {
            if ch.server_listens {
                let ep = ready.endpoints.get(i).cloned().flatten();
                ends.push(dial(sc.transport, ep.as_ref(), &token));
                endpoints.push(None);
            } else {
                self.serial += 1;
                let (end, ep) = own_fifo(self.decoys, self.serial).ok_or(Over)?;
                ends.push(Some(end));
                endpoints.push(Some(ep));
            }
        }
        // This side's own names, removed once the server has opened them.
        let own_names: Vec<std::path::PathBuf> = (endpoints.iter().flatten())
            .filter_map(|e| match e {
                Endpoint::Path(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        let mut wired = serde_json::to_value(Wired {
            endpoints,
            locals: vec![None; channels.len()],
        })
        .expect("JSON");
        let how = self.take_step();
        if let Some(Break::Named(n)) = how {
            if n % 5 == 4 {
                // Its own FIFOs, named, and no longer read.
                for (ch, end) in channels.iter().zip(ends.iter_mut()) {
                    if !ch.server_listens {
                        *end = None;
                    }
                }
            } else {
                lie_wired(&mut wired, n, self.decoys);
            }
        }
        let sent = self.send(FrameType::Wired, &wired, how.as_ref());
        let removed = || {
            for p in &own_names {
                let _ = std::fs::remove_file(p);
            }
        };
        if sent.is_err() {
            removed();
            return Err(Over);
        }
        let answer = self.expect(FrameType::Wired);
        removed();
        answer?;
        let how = self.take_step();
        let start = match how {
            Some(Break::Named(_)) => json!({ "now": 1 }),
            _ => json!({}),
        };
        self.send(FrameType::Start, &start, how.as_ref())?;
        self.running = true;
        // The data: what this side sends (a little, then the end), then what it reads.
        let data = self.take_step();
        let mine: Vec<Role> = roles
            .iter()
            .map(|r| match r {
                Role::Sender => Role::Receiver,
                Role::Receiver => Role::Sender,
            })
            .collect();
        let mut by_stream: Vec<Option<DataEnd>> = (0..roles.len()).map(|_| None).collect();
        for (ch, end) in channels.iter().zip(ends) {
            by_stream[ch.stream] = end;
        }
        let payload = vec![0x5Au8; (sc.size as usize * 4).min(16 << 10)];
        match data {
            Some(Break::Close) => by_stream.drain(..).flatten().for_each(DataEnd::close),
            Some(Break::Silence)
                if matches!(sc.stop, Stop::Duration(_)) && sc.transport != TransportKind::Fifo =>
            {
                // Held open, silent, until the server gives up on the run.
                let until = (Instant::now() + step() * 6 + run_time(sc.stop)).min(self.until);
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
                for (i, role) in mine.iter().enumerate() {
                    if *role == Role::Sender {
                        if let Some(mut end) = by_stream[i].take() {
                            fill(&mut end, garbage.as_deref().unwrap_or(&payload), self.until);
                            end.close();
                        }
                    }
                }
                for (i, role) in mine.iter().enumerate() {
                    if *role == Role::Receiver {
                        if let Some(mut end) = by_stream[i].take() {
                            drain(&mut end, self.until);
                            end.close();
                        }
                    }
                }
            }
        }
        let how = self.take_step();
        for (i, role) in mine.iter().enumerate() {
            let mut signal = json!({ "stream": i, "sender_done": *role == Role::Sender });
            if let Some(Break::Named(n)) = how {
                signal["stream"] =
                    json!([u64::from(u32::MAX), roles.len() as u64, 1u64 << 40][n % 3]);
            }
            self.send(FrameType::Signal, &signal, how.as_ref().filter(|_| i == 0))?;
        }
        self.expect(FrameType::Result)?;
        self.running = false;
        Ok(())
    }
}

/// How long a run of `stop` lasts, planned.
fn run_time(stop: Stop) -> Duration {
    match stop {
        Stop::Duration(d) => d,
        _ => Duration::ZERO,
    }
}

/// Dial the server's endpoint for a channel (and send the run's token on a socket), or
/// open its FIFO for writing.
fn dial(kind: TransportKind, ep: Option<&Endpoint>, token: &[u8]) -> Option<DataEnd> {
    let mut end = match (kind, ep?) {
        (TransportKind::Tcp, Endpoint::Address(a)) => {
            DataEnd::Tcp(TcpStream::connect_timeout(a, Duration::from_secs(1)).ok()?)
        }
        (TransportKind::Unix, Endpoint::Path(p)) => DataEnd::Unix(UnixStream::connect(p).ok()?),
        (TransportKind::Fifo, Endpoint::Path(p)) => {
            let fd = nix::fcntl::open(
                p,
                nix::fcntl::OFlag::O_WRONLY
                    | nix::fcntl::OFlag::O_NONBLOCK
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .ok()?;
            return Some(DataEnd::Fifo(std::fs::File::from(crate::sys::own_fd(fd))));
        }
        _ => return None,
    };
    let until = Instant::now() + Duration::from_secs(1);
    if fill(&mut end, token, until) as usize != token.len() {
        return None;
    }
    match &end {
        DataEnd::Tcp(s) => s.set_nonblocking(true).ok()?,
        DataEnd::Unix(s) => s.set_nonblocking(true).ok()?,
        DataEnd::Fifo(_) => {}
    }
    Some(end)
}

/// A FIFO of this side's for the server to write (its read end open), as sockbench
/// names one.
fn own_fifo(decoys: &Decoys, n: u64) -> Option<(DataEnd, Endpoint)> {
    let p = decoys.name("fifo", n);
    let _ = std::fs::remove_file(&p);
    nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).ok()?;
    let fd = nix::fcntl::open(
        &p,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    let end = DataEnd::Fifo(std::fs::File::from(crate::sys::own_fd(fd)));
    Some((end, Endpoint::Path(p)))
}

/// The lies a scenario can tell: over each of the server's limits, a transport it must
/// refuse a client on this host, settings it must not take from a client.
fn lie_scenario(msg: &mut serde_json::Value, n: usize) {
    let sc = &mut msg["scenario"];
    match n % 14 {
        0 => sc["size"] = json!(0),
        1 => sc["size"] = json!(u64::MAX),
        2 => sc["parallel"] = json!(0),
        3 => sc["parallel"] = json!(u32::MAX),
        4 => sc["stop"] = json!({ "duration": { "secs": u64::MAX, "nanos": 999_999_999 } }),
        5 => sc["stop"] = json!({ "duration": { "secs": 0, "nanos": 0 } }),
        6 => sc["stop"] = json!({ "count": 0 }),
        7 => sc["transport"] = json!(["pipe", "socketpair", "mq", "udp6"][(n / 14) % 4]),
        8 => sc["sndbuf"] = json!(u64::MAX),
        9 => sc["extras"]["writes"] = json!(0),
        10 => sc["extras"]["open"] = json!(u32::MAX),
        11 => {
            // Pinning and addresses are the server's own business: taken, and dropped.
            sc["cpus"] = json!([0, 0]);
            sc["bind"] = json!("127.0.0.1:9");
            sc["connect"] = json!("10.0.0.1");
        }
        12 => {
            sc["workload"] = json!("pingpong");
            msg["bidir"] = json!(true);
        }
        _ => msg["server_role"] = json!("both"),
    }
}

/// The lies a client's `Wired` can tell: its endpoints and its answering ends anywhere
/// (a decoy: a name or an address no trust check lets through), one too many or too few.
fn lie_wired(wired: &mut serde_json::Value, n: usize, decoys: &Decoys) {
    let d = decoys.endpoints();
    let decoy = serde_json::to_value(&d[(n / 4) % d.len()]).expect("JSON");
    let channels = wired["endpoints"].as_array().map_or(0, Vec::len);
    match n % 5 {
        0 => wired["endpoints"] = json!(vec![decoy; channels]),
        // An answering end at an address of this host (the other process's listener)
        // is taken as given and only waited for: not one of these.
        1 if matches!(decoy.get("address"), Some(a) if a.as_str().is_some_and(|a| a.starts_with("127."))) => {
            wired["locals"] = json!(vec![serde_json::Value::Null; channels + 1])
        }
        1 => wired["locals"] = json!(vec![decoy; channels]),
        2 => {
            if let Some(e) = wired["endpoints"].as_array_mut() {
                e.push(decoy);
            }
        }
        _ => wired["endpoints"] = json!([]),
    }
}

/// A server's shared state for the fuzz: one test at a time, the fuzz's deadlines, each
/// test's line kept rather than printed.
fn shared(key: Option<Key>) -> Shared {
    let limits = Limits {
        max_duration_s: 1,
        ..Limits::default()
    };
    let mut s = Shared::new(key, limits, None);
    s.deadlines = deadlines();
    s.kept = Some(Default::default());
    s
}

/// Run one session; Err names what broke a promise.
fn session(
    case: &Case,
    servers: &[Arc<Shared>; 2],
    decoys: &Arc<Decoys>,
    sc: &Scenario,
) -> Result<(), TestCaseError> {
    let (mine, theirs) = loopback();
    let d = deadlines();
    // No end by then is a hang. Bounded waits longer than the fuzz's deadlines count as
    // an end: the transport's own accept deadline (5 s: an answering end named at another
    // port of this host is waited for), a run without a planned end cut at the server's
    // --max-duration (1 s here), roles given 2 s to end once their run is abandoned.
    let bound = (d.handshake + (d.step * 6 + d.stall + run_time(case.stop)) * case.runs as u32) * 2
        + Duration::from_secs(if cfg!(debug_assertions) { 12 } else { 9 });
    let started = Instant::now();
    let until = started + bound;
    let shared = Arc::clone(&servers[usize::from(case.keyed)]);
    if let Some(k) = &shared.kept {
        k.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    // The server, in a thread of its own: a hang is reported, not waited for.
    let watch = Arc::new(Watch::default());
    let (done_tx, done_rx) = mpsc::channel();
    {
        let watch = Arc::clone(&watch);
        let shared = Arc::clone(&shared);
        let keep = theirs.try_clone().expect("clone");
        std::thread::spawn(move || {
            let addrs = (
                keep.peer_addr().expect("peer"),
                keep.local_addr().expect("local"),
            );
            let trust = PeerTrust::of_known(
                addrs,
                nix::unistd::geteuid().as_raw(),
                vec![std::process::id() as i32],
            );
            let ctl = Control::new(Box::new(Watched::server(theirs, watch)));
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                converse(
                    &shared,
                    ctl,
                    (Peer::Local, trust),
                    "fuzz".into(),
                    Instant::now(),
                    None,
                )
                .map_err(|e| format!("{e:#}"))
            }));
            hang_up(&keep);
            let _ = done_tx.send(r);
        });
    }
    // The client.
    let script_sock = mine.try_clone().expect("clone");
    let mut s = Script {
        case,
        decoys,
        sc,
        sock: script_sock,
        step: 0,
        got: Vec::new(),
        silent_at: None,
        lied_transport: false,
        running: false,
        silent_unseen: false,
        until,
        serial: 0,
    };
    let key = case.keyed.then(key);
    let _ = s.play(key.as_ref());
    let got = done_rx.recv_timeout(until.saturating_duration_since(Instant::now()));
    let ended = Instant::now();
    let Ok(outcome) = got else {
        hang_up(&mine);
        return Err(TestCaseError::fail(format!(
            "the server's conversation hung: no end within {bound:?} (the client's last step {}, frames from the server {:?})",
            s.step, s.got
        )));
    };
    // What the server sent after the script stopped reading, to its end.
    let _ = s.sock.set_read_timeout(Some(Duration::from_millis(500)));
    let mut closed = false;
    loop {
        match frame::read_frame(&mut s.sock) {
            Ok(f) => s.got.push(f.kind),
            Err(frame::FrameError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                closed = true;
                break;
            }
            Err(frame::FrameError::Io(e)) if e.kind() == io::ErrorKind::ConnectionReset => {
                closed = true;
                break;
            }
            Err(_) => break,
        }
    }
    hang_up(&mine);
    let outcome = match outcome {
        Ok(r) => r,
        Err(p) => {
            let why = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Err(TestCaseError::fail(format!("the server panicked: {why}")));
        }
    };
    if !closed {
        return Err(TestCaseError::fail(format!(
            "the conversation ended ({outcome:?}) and the server did not hang up"
        )));
    }
    if let Some(i) = s.got.iter().position(|k| *k == FrameType::Error) {
        if i + 1 != s.got.len() {
            return Err(TestCaseError::fail(format!(
                "the server went on after its refusal: {:?}",
                s.got
            )));
        }
    }
    if let Some(at) = s.silent_at {
        // A run whose roles never saw the client's data end, and which no planned time
        // ends, is cut at the server's --max-duration.
        let unseen = if s.silent_unseen && !matches!(case.stop, Stop::Duration(_)) {
            Duration::from_secs(shared.limits.max_duration_s)
        } else {
            Duration::ZERO
        };
        let most = (d.handshake.max(d.idle) + d.step * 2 + d.stall + run_time(case.stop)) * 2
            + unseen
            + Duration::from_millis(if cfg!(debug_assertions) { 2000 } else { 500 });
        let waited = ended.saturating_duration_since(at);
        if waited > most {
            return Err(TestCaseError::fail(format!(
                "the client fell silent and the server waited {waited:?} (its deadlines allow {most:?})"
            )));
        }
    }
    if let Some(what) = decoys.touched() {
        return Err(TestCaseError::fail(what));
    }
    // Before the handshake, a handshake's frames (a refusal, 4 KiB, the largest); after
    // it, a scenario's or a `Wired` (64 KiB); and what one read brings.
    for (established, held, cap) in watch.notes() {
        let most = if established {
            FrameType::Scenario.cap()
        } else {
            FrameType::Error.cap()
        };
        if cap > most || held > most + (16 << 10) {
            return Err(TestCaseError::fail(format!(
                "the server held {held} bytes of the client's frames and would take {cap} (at most {most} {} the handshake)",
                if established { "after" } else { "before" }
            )));
        }
    }
    if case.breaks.is_empty() {
        let kept = shared
            .kept
            .as_ref()
            .map(|k| k.lock().unwrap_or_else(|e| e.into_inner()).join("; "))
            .unwrap_or_default();
        let results = s.got.iter().filter(|k| **k == FrameType::Result).count();
        let timing = [
            "sent nothing for",
            "not ready within",
            "stalled",
            "within",
            "too slow",
        ]
        .iter()
        .any(|w| kept.contains(w) || outcome.as_ref().err().is_some_and(|e| e.contains(w)));
        if (outcome.is_err() || results != case.runs) && !timing {
            return Err(TestCaseError::fail(format!(
                "an honest client's session failed: {outcome:?}, {results} results of {} runs; the server logged: {kept}",
                case.runs
            )));
        }
    }
    Ok(())
}

/// Threads and descriptors of this process (leaked ones pile up over a million sessions).
fn resources() -> (usize, usize) {
    let count = |dir: &str| std::fs::read_dir(dir).map_or(0, |d| d.count());
    (count("/proc/self/task"), count("/proc/self/fd"))
}

/// A million sessions with `PROPTEST_CASES=1000000` (`bench/fuzz_control.sh`); a few
/// hundred in the test suite.
#[test]
fn a_hostile_client_never_makes_the_server_panic_hang_hold_too_much_or_go_on_after_a_refusal() {
    let planned: Vec<(TransportKind, Scenario)> =
        [TransportKind::Tcp, TransportKind::Unix, TransportKind::Fifo]
            .into_iter()
            .map(|t| {
                let sc = crate::plan::first_scenario(&["stream", "-t", &t.to_string(), "-d", "1"]);
                (t, sc)
            })
            .collect();
    let done = std::sync::atomic::AtomicU64::new(0);
    let stats = Stats::from_env();
    run_sessions(
        any_case,
        // Each worker its own decoys and its own servers (one test at a time each).
        || {
            let servers = [Arc::new(shared(None)), Arc::new(shared(Some(key())))];
            (Arc::new(Decoys::new()), servers)
        },
        |(decoys, servers), case| {
            let base = planned.iter().find(|p| p.0 == case.transport);
            let mut sc = base.expect("planned").1.clone();
            sc.size = case.size;
            sc.parallel = case.parallel;
            sc.stop = case.stop;
            let t = Instant::now();
            let r = session(&case, servers, decoys, &sc);
            stats.add(
                || match case.breaks.first() {
                    Some((at, how)) => format!("{} at {at}", how.name()),
                    None => "honest".into(),
                },
                t.elapsed(),
            );
            r?;
            // Over a long run, nothing piles up: no thread, no descriptor per session.
            if done.fetch_add(1, Ordering::Relaxed) % 4096 == 4095 {
                let (threads, fds) = resources();
                prop_assert!(
                    threads < 1000 && fds < 4000,
                    "{threads} threads, {fds} descriptors"
                );
            }
            Ok(())
        },
    );
}

/// Sessions this target once failed (issue 28, "a fuzz target over the server's and
/// client's state machines"), each kept as a regression test.
#[test]
fn sessions_that_once_broke_the_server_no_longer_do() {
    let decoys = Arc::new(Decoys::new());
    let servers = [Arc::new(shared(None)), Arc::new(shared(Some(key())))];
    let case = |transport: TransportKind, breaks| Case {
        keyed: false,
        transport,
        server_role: Role::Receiver,
        bidir: false,
        parallel: 1,
        size: 64,
        stop: Stop::Count(2),
        runs: 1,
        breaks,
    };
    let cases = [
        // A signal for a stream that does not exist: refused, and then the server's own
        // roles' signals followed its refusal.
        case(
            TransportKind::Tcp,
            vec![(
                5,
                Break::Lie {
                    leaf: 0,
                    with: json!(-1),
                },
            )],
        ),
        case(TransportKind::Unix, vec![(5, Break::Named(0))]),
        // A FIFO this client named and does not read: the server's conversation waited
        // in open() forever.
        case(TransportKind::Fifo, vec![(2, Break::Named(4))]),
        // A scenario that says udp6 while the client plays tcp, then silence: the
        // server's UDP receiver, already at its start line, had nothing to wake it, so
        // the server waited 2 s for a thread it then left blocked for good.
        Case {
            size: 1,
            stop: Stop::Count(1),
            ..case(
                TransportKind::Tcp,
                vec![
                    (
                        3,
                        Break::Cut {
                            keep: 0,
                            close: false,
                        },
                    ),
                    (1, Break::Named(4361)),
                ],
            )
        },
        // The same lie, the run then cut off in its signals (a frame's header announcing
        // 64 bytes, and nothing after it).
        Case {
            size: 1,
            stop: Stop::Count(1),
            ..case(
                TransportKind::Tcp,
                vec![
                    (
                        5,
                        Break::Announce {
                            kind: 6,
                            len: 64,
                            send: 0,
                        },
                    ),
                    (1, Break::Named(9681)),
                ],
            )
        },
        // Its data connection said to come from another port of this host: the server
        // waited the transport's 5 s for it, not a step.
        case(
            TransportKind::Tcp,
            vec![(
                2,
                Break::Lie {
                    leaf: 1,
                    with: json!({ "address": "127.0.0.1:22" }),
                },
            )],
        ),
    ];
    for mut c in cases {
        if c.transport == TransportKind::Fifo {
            c.server_role = Role::Sender;
        }
        let mut sc = crate::plan::first_scenario(&["stream", "-t", &c.transport.to_string()]);
        sc.size = c.size;
        sc.stop = c.stop;
        let t = Instant::now();
        if let Err(e) = session(&c, &servers, &decoys, &sc) {
            panic!("{e}\n{c:#?}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "{:?}\n{c:#?}",
            t.elapsed()
        );
    }
}

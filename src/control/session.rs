//! The server's side of a control conversation as a state machine with no I/O: a frame
//! in, a step out (answer, run this scenario, end, refuse). The server's driver does the
//! I/O and the runs; a fuzz test drives this directly with arbitrary frames.
//!
//! Order: Hello, then (with a key) Auth, then any number of Scenario (each followed by a
//! run the driver carries out), then Bye. Anything else, anything out of order, any body
//! that does not parse, and any scenario over the server's limits ends the conversation
//! with a reason.

use std::time::Duration;

use super::auth::{self, Key, NONCE_BYTES};
use super::frame::{Frame, FrameType};
use super::messages::{Auth, Bye, DriveMsg, Hello, Limits, ScenarioMsg, Welcome};
use super::{parse, Deadlines, VERSION};
use crate::scenario::Stop;
use crate::scenario::{Scenario, MAX_BUFFER, MAX_SIZE};
use crate::transport::TransportKind;
use crate::vocab::Peer;
use crate::workload::spec;

/// Where the conversation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Hello,
    Auth,
    Established,
    Over,
}

/// What the driver does next.
#[derive(Debug)]
pub enum Step {
    /// Send this frame (JSON body) and wait for the next.
    Reply(FrameType, Vec<u8>),
    /// Run this (checked) scenario, then wait for the next frame.
    Run(Box<ScenarioMsg>),
    /// A mesh coordinator asks for this (checked) test, driven from here as a client.
    Drive(Box<DriveMsg>),
    /// Nothing to do (a signal that trailed the last run).
    Ignore,
    /// The client said goodbye.
    End,
    /// Tell the client why and hang up.
    Refuse(String),
}

/// A server's conversation with one client.
pub struct Session {
    state: State,
    key: Option<Key>,
    nonce: Vec<u8>,
    client_nonce: Vec<u8>,
    limits: Limits,
    peer: Peer,
    deadlines: Deadlines,
}

impl Session {
    /// A conversation that has not begun, with this server's key (if any), limits and
    /// knowledge of the peer.
    ///
    /// # Errors
    /// The kernel cannot give a nonce.
    pub fn new(key: Option<Key>, limits: Limits, peer: Peer) -> anyhow::Result<Session> {
        Ok(Session {
            state: State::Hello,
            key,
            nonce: auth::random(NONCE_BYTES)?,
            client_nonce: Vec::new(),
            limits,
            peer,
            deadlines: Deadlines::default(),
        })
    }

    /// The same conversation with other deadlines (a test's, shorter).
    pub fn with_deadlines(mut self, deadlines: Deadlines) -> Session {
        self.deadlines = deadlines;
        self
    }

    /// How long the next frame may take (the driver also bounds the whole handshake by
    /// [`Deadlines::handshake`]).
    pub fn wait(&self) -> Duration {
        let d = &self.deadlines;
        match self.state {
            State::Hello => d.hello,
            State::Auth => d.handshake,
            State::Established | State::Over => d.idle,
        }
    }

    /// Whether the handshake is over (so runs may be asked for).
    pub fn established(&self) -> bool {
        self.state == State::Established
    }

    /// The frame types a client may send now, the rest refused on their header: before
    /// the handshake is done only its own frames (so nothing large is held for a client
    /// that has proved nothing), after it what a client sends in a conversation and its
    /// runs; never the server's own frames or an agent's report.
    pub fn accepts(&self) -> &'static [FrameType] {
        match self.state {
            State::Hello => &[FrameType::Hello, FrameType::Bye, FrameType::Error],
            State::Auth => &[FrameType::Auth, FrameType::Bye, FrameType::Error],
            State::Established => &[
                FrameType::Scenario,
                FrameType::Drive,
                FrameType::Wired,
                FrameType::Start,
                FrameType::Signal,
                FrameType::Bye,
                FrameType::Error,
            ],
            State::Over => &[],
        }
    }

    /// The peer.
    pub fn peer(&self) -> Peer {
        self.peer
    }

    /// Take one frame from the client.
    pub fn on_frame(&mut self, f: &Frame) -> Step {
        let step = match self.state {
            State::Hello => self.hello(f),
            State::Auth => self.auth(f),
            State::Established => self.established_frame(f),
            State::Over => Err("the conversation is over".to_string()),
        };
        match step {
            Ok(s) => {
                if matches!(s, Step::End) {
                    self.state = State::Over;
                }
                s
            }
            Err(why) => {
                self.state = State::Over;
                Step::Refuse(why)
            }
        }
    }

    fn hello(&mut self, f: &Frame) -> Result<Step, String> {
        let h: Hello = parse(f, FrameType::Hello).map_err(|e| e.to_string())?;
        if h.version != VERSION {
            return Err(format!(
                "this server speaks protocol version {VERSION}, the client {}: use the same sockbench release on both hosts",
                h.version
            ));
        }
        self.client_nonce = auth::nonce_bytes(&h.nonce)
            .ok_or_else(|| "the hello's nonce is not 32 bytes of hex".to_string())?;
        let welcome = Welcome {
            version: VERSION,
            tool: env!("CARGO_PKG_VERSION").to_string(),
            nonce: hex::encode(&self.nonce),
            key_required: self.key.is_some(),
            limits: self.limits,
        };
        self.state = if self.key.is_some() {
            State::Auth
        } else {
            State::Established
        };
        Ok(Step::Reply(FrameType::Welcome, json(&welcome)))
    }

    fn auth(&mut self, f: &Frame) -> Result<Step, String> {
        let a: Auth = parse(f, FrameType::Auth).map_err(|e| e.to_string())?;
        let key = self.key.as_ref().expect("Auth state only with a key");
        if !key.check_client(&a.mac, &self.client_nonce, &self.nonce) {
            return Err("authentication failed: the client's key is not this server's".into());
        }
        let answer = Auth {
            mac: key.server_proof(&self.nonce, &self.client_nonce),
        };
        self.state = State::Established;
        Ok(Step::Reply(FrameType::Auth, json(&answer)))
    }

    fn established_frame(&mut self, f: &Frame) -> Result<Step, String> {
        if f.kind == FrameType::Signal {
            // A role's last signal can trail its run; between runs it means nothing.
            return Ok(Step::Ignore);
        }
        if f.kind == FrameType::Bye {
            let _: Bye = parse(f, FrameType::Bye).map_err(|e| e.to_string())?;
            return Ok(Step::End);
        }
        if f.kind == FrameType::Drive {
            let m: DriveMsg = parse(f, FrameType::Drive).map_err(|e| e.to_string())?;
            // Without a key anyone who reaches this port could make it dial any address
            // and send at it: only a client on this host may, which could run the test
            // itself anyway.
            if self.key.is_none() && self.peer == Peer::Remote {
                return Err(
                    "this server has no --key-file, so it drives mesh tests only for clients on its own host: start the agents with --key-file (and the coordinator with the same key)"
                        .into(),
                );
            }
            m.check(&self.limits)?;
            return Ok(Step::Drive(Box::new(m)));
        }
        let mut msg: ScenarioMsg = parse(f, FrameType::Scenario).map_err(|e| e.to_string())?;
        let parallel = msg.scenario.parallel;
        if msg.bidir {
            if !crate::workload::spec(msg.scenario.workload)
                .takes()
                .both_ways
            {
                return Err(format!("{} does not run both ways", msg.scenario.workload));
            }
            // Limits count the streams of both directions.
            msg.scenario.parallel = parallel.saturating_mul(2);
        }
        msg.scenario = check_scenario(msg.scenario, &self.limits, self.peer)?;
        msg.scenario.parallel = parallel;
        Ok(Step::Run(Box::new(msg)))
    }
}

fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("control messages serialize")
}

/// A client's scenario, checked against what this server allows and made this host's:
/// the server binds where the client reached it (the driver fills that in), pins no CPU a
/// remote client names, and makes its names in its own directory.
///
/// # Errors
/// What is over a limit or cannot run here, said for the client's user.
pub fn check_scenario(mut sc: Scenario, limits: &Limits, peer: Peer) -> Result<Scenario, String> {
    let t = sc.transport;
    if let Some(why) = spec(sc.workload).refuses_on_server(&sc, peer) {
        return Err(why);
    }
    if spec(sc.workload).wiring(t) == crate::workload::Wiring::InProcess {
        return Err(format!(
            "{} over {t} makes its pairs inside one process: run it with both roles as threads",
            sc.workload
        ));
    }
    if matches!(t, TransportKind::Pipe | TransportKind::Socketpair) && peer != Peer::Parent {
        return Err(format!(
            "{t} exists only inside one process tree: use --placement processes, or a named transport (fifo, unix) with a server"
        ));
    }
    if !t.is_ip() && peer == Peer::Remote {
        return Err(format!(
            "{t} works only with a server on the same host; between hosts use tcp, tcp6, udp or udp6"
        ));
    }
    let size_limit = limits.max_size.min(MAX_SIZE);
    if sc.size == 0 || sc.size > size_limit {
        return Err(format!(
            "message size {} is outside this server's limit of 1 to {size_limit} bytes",
            sc.size
        ));
    }
    if sc.parallel == 0 || sc.parallel > limits.max_streams {
        return Err(format!(
            "{} parallel streams; this server allows 1 to {}",
            sc.parallel, limits.max_streams
        ));
    }
    let max = Duration::from_secs(limits.max_duration_s);
    match sc.stop {
        Stop::Duration(d) if d > max || d.is_zero() => {
            return Err(format!(
                "a {:.1} s run; this server allows runs of up to {} s (its --max-duration)",
                d.as_secs_f64(),
                limits.max_duration_s
            ))
        }
        Stop::Count(0) | Stop::Bytes(0) => return Err("a run of nothing".into()),
        _ => {}
    }
    for (name, b) in [("--sndbuf", sc.sndbuf), ("--rcvbuf", sc.rcvbuf)] {
        if b.is_some_and(|b| b == 0 || b > MAX_BUFFER) {
            return Err(format!("{name} is outside 1 to {MAX_BUFFER} bytes"));
        }
    }
    // One message buffer per stream and role, plus the socket buffers the client asks for.
    let per_stream = sc
        .size
        .saturating_mul(2)
        .saturating_add(sc.sndbuf.unwrap_or(0).saturating_mul(2))
        .saturating_add(sc.rcvbuf.unwrap_or(0).saturating_mul(2));
    let memory = per_stream.saturating_mul(u64::from(sc.parallel));
    if memory > limits.max_memory {
        return Err(format!(
            "this test would take {memory} bytes of buffers on the server, over its limit of {} (fewer streams or smaller messages)",
            limits.max_memory
        ));
    }
    let x = &sc.extras;
    if x.writes == 0 || u64::from(x.writes) > sc.size.max(1) {
        return Err("--writes must be between 1 and the message size".into());
    }
    if x.open == 0 || x.open > 10_000 {
        return Err("--open must be between 1 and 10000".into());
    }
    if x.rate.is_some_and(|r| !r.is_finite() || r <= 0.0) {
        return Err("--rate must be a positive number".into());
    }
    if let Some(why) = spec(sc.workload).refuses(&sc) {
        return Err(why);
    }
    if peer != Peer::Parent {
        sc.cpus = None;
    }
    sc.bind = None;
    sc.connect = None;
    Ok(sc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::frame::{self, Decoder};
    use crate::control::messages::Auth;
    use crate::scenario::WorkloadKind;
    use crate::vocab::Role;

    fn frame_of<T: serde::Serialize>(kind: FrameType, v: &T) -> Frame {
        Frame {
            kind,
            body: serde_json::to_vec(v).unwrap(),
        }
    }

    fn hello(nonce: &[u8]) -> Frame {
        frame_of(
            FrameType::Hello,
            &Hello {
                version: VERSION,
                tool: "test".into(),
                nonce: hex::encode(nonce),
            },
        )
    }

    pub(crate) fn scenario() -> Scenario {
        Scenario::new(WorkloadKind::Stream, TransportKind::Tcp, 64 << 10)
    }

    fn scenario_frame(sc: Scenario) -> Frame {
        frame_of(
            FrameType::Scenario,
            &ScenarioMsg {
                scenario: sc,
                server_role: Role::Receiver,
                bidir: false,
            },
        )
    }

    fn welcome(step: Step) -> Welcome {
        match step {
            Step::Reply(FrameType::Welcome, body) => serde_json::from_slice(&body).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    fn drive_frame() -> Frame {
        frame_of(
            FrameType::Drive,
            &DriveMsg {
                workload: "tcp-pingpong".into(),
                target: "127.0.0.1:5290".into(),
                duration_s: 1.0,
                warmup_s: 0.0,
                parallel: 1,
                size: None,
            },
        )
    }

    #[test]
    fn a_mesh_test_is_driven_for_a_local_client_or_with_a_key_and_refused_otherwise() {
        for (peer, driven) in [(Peer::Local, true), (Peer::Remote, false)] {
            let mut s = Session::new(None, Limits::default(), peer).unwrap();
            welcome(s.on_frame(&hello(&[7; 32])));
            match s.on_frame(&drive_frame()) {
                Step::Drive(m) if driven => assert_eq!(m.workload, "tcp-pingpong"),
                Step::Refuse(why) if !driven => assert!(why.contains("--key-file"), "{why}"),
                other => panic!("{peer:?}: {other:?}"),
            }
        }
        // A request over the limits is refused, with the agent's reason.
        let mut s = Session::new(None, Limits::default(), Peer::Local).unwrap();
        welcome(s.on_frame(&hello(&[7; 32])));
        let mut f = drive_frame();
        f.body = String::from_utf8(f.body)
            .unwrap()
            .replace("tcp-pingpong", "sctp")
            .into_bytes();
        assert!(matches!(s.on_frame(&f), Step::Refuse(w) if w.contains("unknown mesh test")));
    }

    #[test]
    fn without_a_key_a_hello_establishes_and_a_scenario_runs() {
        let mut s = Session::new(None, Limits::default(), Peer::Local).unwrap();
        assert_eq!(s.wait(), crate::control::HELLO_DEADLINE);
        let w = welcome(s.on_frame(&hello(&[7; 32])));
        assert!(!w.key_required);
        assert_eq!(w.version, VERSION);
        assert!(s.established());
        assert_eq!(s.wait(), crate::control::IDLE_DEADLINE);
        match s.on_frame(&scenario_frame(scenario())) {
            Step::Run(m) => assert_eq!(m.scenario.transport, TransportKind::Tcp),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            s.on_frame(&frame_of(FrameType::Bye, &Bye {})),
            Step::End
        ));
        assert!(matches!(s.on_frame(&hello(&[7; 32])), Step::Refuse(_)));
    }

    #[test]
    fn with_a_key_only_the_right_proof_gets_in_and_the_server_proves_itself() {
        let key = Key::new(b"a pre-shared key of the test").unwrap();
        let client_nonce = [9u8; 32];
        for right in [true, false] {
            let mut s = Session::new(Some(key.clone()), Limits::default(), Peer::Local).unwrap();
            let w = welcome(s.on_frame(&hello(&client_nonce)));
            assert!(w.key_required);
            assert!(!s.established());
            // A scenario before the proof is out of order.
            let mut early =
                Session::new(Some(key.clone()), Limits::default(), Peer::Local).unwrap();
            early.on_frame(&hello(&client_nonce));
            assert!(matches!(
                early.on_frame(&scenario_frame(scenario())),
                Step::Refuse(_)
            ));
            let server_nonce = hex::decode(&w.nonce).unwrap();
            let signer = if right {
                key.clone()
            } else {
                Key::new(b"another key of the same size!").unwrap()
            };
            let proof = Auth {
                mac: signer.client_proof(&client_nonce, &server_nonce),
            };
            match s.on_frame(&frame_of(FrameType::Auth, &proof)) {
                Step::Reply(FrameType::Auth, body) if right => {
                    let a: Auth = serde_json::from_slice(&body).unwrap();
                    assert!(key.check_server(&a.mac, &server_nonce, &client_nonce));
                    assert!(s.established());
                }
                Step::Refuse(why) if !right => {
                    assert!(why.contains("authentication failed"), "{why}");
                    assert!(!s.established());
                }
                other => panic!("right={right}: {other:?}"),
            }
        }
    }

    #[test]
    fn other_versions_bad_nonces_and_frames_out_of_order_are_refused() {
        let mut s = Session::new(None, Limits::default(), Peer::Local).unwrap();
        let f = frame_of(
            FrameType::Hello,
            &Hello {
                version: VERSION + 1,
                tool: "x".into(),
                nonce: hex::encode([1u8; 32]),
            },
        );
        assert!(matches!(s.on_frame(&f), Step::Refuse(w) if w.contains("protocol version")));
        let mut s = Session::new(None, Limits::default(), Peer::Local).unwrap();
        assert!(matches!(s.on_frame(&hello(&[1; 5])), Step::Refuse(w) if w.contains("nonce")));
        let mut s = Session::new(None, Limits::default(), Peer::Local).unwrap();
        assert!(matches!(
            s.on_frame(&scenario_frame(scenario())),
            Step::Refuse(_)
        ));
        let mut s = Session::new(None, Limits::default(), Peer::Local).unwrap();
        let typo = Frame {
            kind: FrameType::Hello,
            body: br#"{"version":1,"tool":"x","nonce":"00","extra":1}"#.to_vec(),
        };
        assert!(matches!(s.on_frame(&typo), Step::Refuse(w) if w.contains("unknown field")));
    }

    #[test]
    fn scenarios_over_the_limits_or_out_of_place_are_refused_with_the_limit() {
        let limits = Limits {
            max_duration_s: 10,
            max_size: 1 << 20,
            max_streams: 4,
            max_memory: 16 << 20,
        };
        let check = |f: &dyn Fn(&mut Scenario), peer: Peer| {
            let mut sc = scenario();
            f(&mut sc);
            check_scenario(sc, &limits, peer)
        };
        let refused = |f: &dyn Fn(&mut Scenario), peer: Peer, says: &str| {
            let e = check(f, peer).unwrap_err();
            assert!(e.contains(says), "{e}");
        };
        refused(
            &|s| s.size = (1 << 20) + 1,
            Peer::Local,
            "limit of 1 to 1048576",
        );
        refused(&|s| s.size = 0, Peer::Local, "message size 0");
        refused(&|s| s.parallel = 5, Peer::Local, "allows 1 to 4");
        refused(
            &|s| s.stop = Stop::Duration(Duration::from_secs(11)),
            Peer::Local,
            "up to 10 s",
        );
        refused(&|s| s.stop = Stop::Count(0), Peer::Local, "nothing");
        refused(&|s| s.sndbuf = Some(u64::MAX), Peer::Local, "--sndbuf");
        refused(
            &|s| {
                s.size = 1 << 20;
                s.parallel = 4;
                s.rcvbuf = Some(4 << 20);
            },
            Peer::Local,
            "bytes of buffers",
        );
        refused(&|s| s.extras.rate = Some(f64::NAN), Peer::Local, "--rate");
        refused(&|s| s.extras.writes = 0, Peer::Local, "--writes");
        refused(
            &|s| s.transport = TransportKind::Unix,
            Peer::Remote,
            "same host",
        );
        refused(
            &|s| s.transport = TransportKind::Pipe,
            Peer::Local,
            "--placement processes",
        );
        // Local transports with a local peer, pinning only for the parent.
        let ok = check(
            &|s| {
                s.transport = TransportKind::Fifo;
                s.cpus = Some((0, 1));
                s.bind = Some("127.0.0.1:9".parse().unwrap());
            },
            Peer::Local,
        )
        .unwrap();
        assert_eq!((ok.cpus, ok.bind), (None, None));
        let ok = check(&|s| s.cpus = Some((0, 1)), Peer::Parent).unwrap();
        assert_eq!(ok.cpus, Some((0, 1)));
        assert!(check(&|s| s.transport = TransportKind::Pipe, Peer::Parent).is_ok());
        // A swarm only for a parent (its pairs are not bounded by a server's limits),
        // and only over transports dialed through a listener.
        let swarm = |t: TransportKind| {
            move |s: &mut Scenario| {
                s.workload = WorkloadKind::Swarm;
                s.transport = t;
                s.extras.swarm = Some(crate::scenario::SwarmOptions {
                    pairs: 10,
                    work: crate::reactor::Work::Stream,
                });
            }
        };
        for peer in [Peer::Local, Peer::Remote] {
            refused(
                &swarm(TransportKind::Tcp),
                peer,
                "only with --placement processes",
            );
        }
        assert!(check(&swarm(TransportKind::Tcp), Peer::Parent).is_ok());
        assert!(check(&swarm(TransportKind::Unix), Peer::Parent).is_ok());
        refused(
            &swarm(TransportKind::Socketpair),
            Peer::Parent,
            "inside one process",
        );
        // A relay too (its threads and buffers are not within a server's limits), and
        // its pingpong, timed on one clock, not even for a parent.
        let relay = |shape: crate::scenario::ShapeKind| {
            move |s: &mut Scenario| {
                s.workload = WorkloadKind::Relay;
                if shape == crate::scenario::ShapeKind::Connections {
                    s.stop = crate::scenario::Stop::Count(10);
                }
                s.extras.relay = Some(crate::scenario::RelayOptions {
                    method: crate::copy::Method::ReadWrite,
                    copy: crate::copy::Options::default(),
                    shape,
                    threads: 2,
                });
            }
        };
        use crate::scenario::ShapeKind;
        for peer in [Peer::Local, Peer::Remote] {
            refused(
                &relay(ShapeKind::Streams),
                peer,
                "a relay runs only with --placement processes",
            );
        }
        assert!(check(&relay(ShapeKind::Streams), Peer::Parent).is_ok());
        assert!(check(&relay(ShapeKind::Connections), Peer::Parent).is_ok());
        refused(
            &relay(ShapeKind::Pingpong),
            Peer::Parent,
            "--placement threads",
        );
    }

    #[test]
    fn scenarios_exactly_at_the_limits_run_and_one_past_them_do_not() {
        let limits = Limits {
            max_duration_s: 10,
            max_size: 1 << 20,
            max_streams: 4,
            // Exactly two 1 MiB buffers for each of four streams.
            max_memory: 8 << 20,
        };
        let check = |f: &dyn Fn(&mut Scenario)| {
            let mut sc = scenario();
            f(&mut sc);
            check_scenario(sc, &limits, Peer::Local)
        };
        let at_limits = |s: &mut Scenario| {
            s.size = 1 << 20;
            s.parallel = 4;
            s.stop = Stop::Duration(Duration::from_secs(10));
        };
        assert!(check(&at_limits).is_ok());
        let e = check(&|s| {
            at_limits(s);
            s.sndbuf = Some(1);
        })
        .unwrap_err();
        assert!(e.contains("bytes of buffers"), "{e}");
        let limits_buffers = Limits {
            max_memory: u64::MAX,
            ..limits
        };
        let buffers = |b: u64| {
            let mut sc = scenario();
            sc.sndbuf = Some(b);
            sc.rcvbuf = Some(b);
            check_scenario(sc, &limits_buffers, Peer::Local)
        };
        assert!(buffers(MAX_BUFFER).is_ok());
        assert!(buffers(MAX_BUFFER + 1).unwrap_err().contains("--sndbuf"));
        assert!(buffers(0).unwrap_err().contains("--sndbuf"));
        let writes = |w: u32| {
            check(&|s| {
                s.size = 8;
                s.extras.writes = w;
            })
        };
        assert!(writes(8).is_ok());
        assert!(writes(9).unwrap_err().contains("--writes"));
        let open = |n: u32| check(&|s| s.extras.open = n);
        assert!(open(10_000).is_ok());
        assert!(open(10_001).unwrap_err().contains("--open"));
        assert!(open(0).unwrap_err().contains("--open"));
        let rate = |r: f64| check(&|s| s.extras.rate = Some(r));
        assert!(rate(0.5).is_ok());
        assert!(rate(0.0).unwrap_err().contains("--rate"));
        assert!(rate(-1.0).unwrap_err().contains("--rate"));
        assert!(check(&|s| s.stop = Stop::Duration(Duration::ZERO))
            .unwrap_err()
            .contains("up to 10 s"));
    }

    #[test]
    fn both_ways_counts_the_streams_of_both_directions_against_the_limit() {
        let limits = Limits {
            max_streams: 4,
            ..Limits::default()
        };
        let run = |parallel: u32, workload: WorkloadKind| {
            let mut s = Session::new(None, limits, Peer::Local).unwrap();
            s.on_frame(&hello(&[1; 32]));
            let mut sc = scenario();
            sc.parallel = parallel;
            sc.workload = workload;
            let f = frame_of(
                FrameType::Scenario,
                &ScenarioMsg {
                    scenario: sc,
                    server_role: Role::Receiver,
                    bidir: true,
                },
            );
            s.on_frame(&f)
        };
        match run(2, WorkloadKind::Stream) {
            Step::Run(m) => {
                assert_eq!(m.scenario.parallel, 2);
                assert_eq!(m.server_roles().len(), 4);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(run(3, WorkloadKind::Stream), Step::Refuse(w) if w.contains("allows 1 to 4"))
        );
        assert!(
            matches!(run(1, WorkloadKind::Pingpong), Step::Refuse(w) if w.contains("both ways"))
        );
    }

    /// The state machine under arbitrary input: frames of every type with arbitrary
    /// bodies (and valid ones mixed in), in any order. No panic, every step ends in a
    /// reply, a run, an end or a refusal, and after a refusal nothing more is accepted.
    /// `bench/fuzz_control.sh` runs a million cases.
    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        fn any_frame() -> impl Strategy<Value = Frame> {
            let kinds = proptest::sample::select(FrameType::ALL.to_vec());
            let valid = prop_oneof![
                Just(hello(&[3; 32]).body),
                Just(scenario_frame(scenario()).body),
                Just(br#"{}"#.to_vec()),
                Just(br#"{"mac":"00"}"#.to_vec()),
            ];
            let body = prop_oneof![valid, proptest::collection::vec(any::<u8>(), 0..300)];
            (kinds, body).prop_map(|(kind, body)| Frame { kind, body })
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(500),
                failure_persistence: None,
                .. ProptestConfig::default()
            })]
            #[test]
            fn arbitrary_frames_never_panic_and_a_refusal_is_final(
                frames in proptest::collection::vec(any_frame(), 1..8),
                keyed in any::<bool>(),
                raw in proptest::collection::vec(any::<u8>(), 0..64),
            ) {
                let key = keyed.then(|| Key::new(b"fuzzing key 0123456789").unwrap());
                let mut s = Session::new(key, Limits::default(), Peer::Local).unwrap();
                let mut over = false;
                for f in &frames {
                    let step = s.on_frame(f);
                    if over {
                        prop_assert!(matches!(step, Step::Refuse(_)));
                    }
                    if matches!(step, Step::Refuse(_) | Step::End) {
                        over = true;
                    }
                }
                // Raw bytes through the decoder into the session: same promises.
                let mut d = Decoder::new();
                let mut s = Session::new(None, Limits::default(), Peer::Remote).unwrap();
                if let Ok(frames) = d.feed_all(&raw) {
                    for f in frames {
                        prop_assert!(f.body.len() <= f.kind.cap());
                        let _ = s.on_frame(&f);
                    }
                }
                let _ = frame::encode(FrameType::Bye, &raw);
            }
        }
    }
}

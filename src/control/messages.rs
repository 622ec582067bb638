//! The bodies of control frames (JSON, unknown fields refused) and the plan of a remote
//! run's connections: which process listens on each channel and which way data flows.
//!
//! A conversation: the client says [`Hello`], the server answers [`Welcome`]; with a key,
//! each side proves it holds it ([`Auth`], client first). Then, per run: [`ScenarioMsg`],
//! [`Ready`] (the server's endpoints and the run's token), [`Wired`] from the client (its
//! endpoints), [`Wired`] from the server, [`Start`]; [`SignalMsg`]s both ways while it runs;
//! [`RunResult`] from the server. [`Bye`] ends it; [`Refusal`] ends it with a reason.

use std::net::{SocketAddr, ToSocketAddrs};

use serde::{Deserialize, Serialize};

use crate::environment::Environment;
use crate::measure::cpu::SystemCpu;
use crate::scenario::Scenario;
use crate::transport::{Endpoint, LinkInfo, TransportKind};
use crate::vocab::Role;
use crate::workload::{spec, PeerSignal, Wiring};

use super::wire::WireSide;

/// Client to server, first.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// The protocol version ([`super::VERSION`]).
    pub version: u16,
    /// The client's sockbench version.
    pub tool: String,
    /// The client's nonce (hex), for the key handshake.
    pub nonce: String,
}

/// What a server lets one client ask for.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Longest timed run, in seconds (a run bounded by count or bytes is cut off here too).
    pub max_duration_s: u64,
    /// Largest message.
    pub max_size: u64,
    /// Most parallel streams.
    pub max_streams: u32,
    /// Most buffer memory one test may make the server allocate (message buffers and
    /// requested socket buffers over all streams).
    pub max_memory: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_duration_s: 300,
            max_size: 64 << 20,
            max_streams: 128,
            max_memory: 1 << 30,
        }
    }
}

/// Server to client: the answer to a hello.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Welcome {
    /// The server's protocol version.
    pub version: u16,
    /// The server's sockbench version.
    pub tool: String,
    /// The server's nonce (hex).
    pub nonce: String,
    /// Whether the client must prove it holds the server's key.
    pub key_required: bool,
    /// What the server allows.
    pub limits: Limits,
}

/// A proof of the key: an HMAC over both nonces (hex).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    /// HMAC-SHA256, hex.
    pub mac: String,
}

/// Mesh coordinator to agent: run one test as its client against another agent, and
/// answer with a [`DriveReport`]. The agent checks it against its own limits and builds
/// the command line itself: nothing here is passed through as an argument.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DriveMsg {
    /// The test: one of [`WORKLOADS`] (`tcp-stream`, `tcp-pingpong`,
    /// `udp-pingpong`, `udp-rate`).
    pub workload: String,
    /// The other agent, `HOST:PORT` (its control port).
    pub target: String,
    /// Seconds to measure.
    pub duration_s: f64,
    /// Warm-up seconds before the measured interval.
    pub warmup_s: f64,
    /// Parallel streams.
    pub parallel: u32,
    /// Message size in bytes (`None`: the workload's default).
    pub size: Option<u64>,
}

/// Agent to mesh coordinator: what a driven test gave.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DriveReport {
    /// When the agent started the test and when it ended, by the agent's wall clock
    /// (nanoseconds since the Unix epoch).
    pub started_unix_ns: u64,
    /// See `started_unix_ns`.
    pub ended_unix_ns: u64,
    /// The client's whole JSON report (`--format json`), when it ran.
    pub report: Option<serde_json::Value>,
    /// Why it did not run or did not finish.
    pub error: Option<String>,
    /// The agent's own host and its route toward the target.
    pub host: Option<HostMeta>,
}

/// Client to server: one run of a scenario, with the role the server takes.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioMsg {
    /// What to run (the server checks it against its limits and its own refusals).
    pub scenario: Scenario,
    /// The role the server plays in every stream (with `bidir`, in the first half).
    pub server_role: Role,
    /// Both directions at once: `parallel` streams as `server_role` says, then as many
    /// the other way.
    #[serde(default)]
    pub bidir: bool,
}

impl ScenarioMsg {
    /// The server's role in each stream.
    pub fn server_roles(&self) -> Vec<Role> {
        server_roles(
            self.scenario.parallel as usize,
            self.server_role,
            self.bidir,
        )
    }
}

/// The server's role in each stream of a run of `streams` streams (twice as many with
/// `bidir`, the second half the other way).
pub fn server_roles(streams: usize, server_role: Role, bidir: bool) -> Vec<Role> {
    let other = match server_role {
        Role::Sender => Role::Receiver,
        Role::Receiver => Role::Sender,
    };
    let mut roles = vec![server_role; streams];
    if bidir {
        roles.extend(std::iter::repeat(other).take(streams));
    }
    roles
}

/// Server to client: its listening endpoints (one per channel it listens on, in channel
/// order; `None` where the client listens) and the token that proves a data connection
/// belongs to this run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    /// Per channel.
    pub endpoints: Vec<Option<Endpoint>>,
    /// 16 random bytes, hex.
    pub token: String,
}

/// Either side: its half of the connections is made.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Wired {
    /// Per channel: where this side listens (for the peer to connect to).
    pub endpoints: Vec<Option<Endpoint>>,
    /// Per channel: this side's own end, for a listener that answers it (UDP).
    pub locals: Vec<Option<Endpoint>>,
}

/// Client to server: go.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Start {}

/// The end of the conversation.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Bye {}

/// Why a side stops.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// The reason, for a person.
    pub message: String,
}

/// A role's signal to its peer role, across the processes.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SignalMsg {
    /// Which stream.
    pub stream: u32,
    /// The sender finished (true) or the receiver did (false).
    pub sender_done: bool,
    /// The role has set up its end of every pair (a swarm); `sender_done` is false
    /// then. Absent: not this.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub set_up: bool,
}

impl SignalMsg {
    /// The message that carries `s` for `stream`.
    pub fn of(stream: u32, s: PeerSignal) -> SignalMsg {
        SignalMsg {
            stream,
            sender_done: s == PeerSignal::SenderDone,
            set_up: s == PeerSignal::SetUp,
        }
    }

    /// The in-process signal it carries.
    pub fn signal(self) -> PeerSignal {
        match (self.sender_done, self.set_up) {
            (true, _) => PeerSignal::SenderDone,
            (false, true) => PeerSignal::SetUp,
            (false, false) => PeerSignal::ReceiverDone,
        }
    }
}

/// Server to client: what the server's roles measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunResult {
    /// One per stream, in the order the roles ended.
    pub sides: Vec<WireSide>,
    /// The role of each of `sides`.
    pub roles: Vec<Role>,
    /// What the kernel granted on the server's ends (first stream).
    pub link: LinkInfo,
    /// The server's machine-wide CPU over the run.
    pub system: Option<SystemCpu>,
    /// UDP receive-buffer drops the server's kernel counted.
    pub udp_drops: Option<u64>,
    /// The server's machine.
    pub environment: Environment,
}

/// One one-way or two-way connection of a remote run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channel {
    /// The stream it belongs to.
    pub stream: usize,
    /// Whether the server listens (otherwise the client does).
    pub server_listens: bool,
    /// For a one-way transport: whether it carries data from the sender to the receiver.
    pub forward: bool,
}

/// The channels of a run of `kind` with `wiring` and `streams` streams, where the server
/// plays `server_role`. Sockets are two-way, and the server listens on them (a client
/// behind a firewall can still dial out). One-way transports (fifo, mq, shm) are opened
/// by their reader, so the receiving end of each channel listens; a request/response
/// workload gets a second channel back.
pub fn channels(kind: TransportKind, wiring: Wiring, server_roles: &[Role]) -> Vec<Channel> {
    let mut out = Vec::new();
    if matches!(wiring, Wiring::ListenDial | Wiring::InProcess) {
        return out;
    }
    for (stream, &server_role) in server_roles.iter().enumerate() {
        if kind.is_socket() {
            out.push(Channel {
                stream,
                server_listens: true,
                forward: true,
            });
            continue;
        }
        let server_receives_forward = server_role == Role::Receiver;
        out.push(Channel {
            stream,
            server_listens: server_receives_forward,
            forward: true,
        });
        if wiring == Wiring::Duplex {
            out.push(Channel {
                stream,
                server_listens: !server_receives_forward,
                forward: false,
            });
        }
    }
    out
}

/// The channels of a run of `sc` where the server plays `server_roles`.
pub fn channels_of(sc: &Scenario, server_roles: &[Role]) -> Vec<Channel> {
    channels(
        sc.transport,
        spec(sc.workload).wiring(sc.transport),
        server_roles,
    )
}

/// The tests a mesh can run for a pair, by name.
pub const WORKLOADS: [&str; 4] = ["tcp-stream", "tcp-pingpong", "udp-pingpong", "udp-rate"];

/// What an agent says of itself and of its route toward the agent it measured (read by
/// the agent when it drives a test; null where unreadable).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostMeta {
    /// Host name.
    pub hostname: String,
    /// `uname -sr` and build string.
    pub kernel: String,
    /// CPU model.
    pub cpu_model: Option<String>,
    /// Logical CPUs.
    pub cpus: u32,
    /// `net.ipv4.tcp_congestion_control`.
    pub congestion_control: Option<String>,
    /// The device of the route toward the destination.
    pub route_device: Option<String>,
    /// That device's MTU.
    pub mtu: Option<u32>,
    /// That device's offloads as `ethtool -k` names them (on or off), where readable.
    pub offloads: Option<std::collections::BTreeMap<String, bool>>,
}

impl DriveMsg {
    /// Check a coordinator's request against this agent's limits.
    ///
    /// # Errors
    /// What is wrong, for the coordinator's user.
    pub fn check(&self, limits: &Limits) -> Result<(), String> {
        let m = self;
        if !WORKLOADS.contains(&m.workload.as_str()) {
            return Err(format!(
                "unknown mesh test '{}': one of {}",
                m.workload,
                WORKLOADS.join(", ")
            ));
        }
        if !(m.duration_s.is_finite() && m.duration_s > 0.0) {
            return Err("a mesh test's duration must be above 0 s".into());
        }
        if !(m.warmup_s.is_finite() && m.warmup_s >= 0.0) {
            return Err("a mesh test's warm-up must be 0 s or more".into());
        }
        if m.duration_s + m.warmup_s > limits.max_duration_s as f64 {
            return Err(format!(
                "a mesh test of {:.1} s (with its warm-up) is over this agent's --max-duration of {} s",
                m.duration_s + m.warmup_s,
                limits.max_duration_s
            ));
        }
        if m.parallel == 0 || m.parallel > limits.max_streams {
            return Err(format!(
                "{} parallel streams: this agent allows 1 to {} (its --max-streams)",
                m.parallel, limits.max_streams
            ));
        }
        if let Some(size) = m.size {
            if size == 0 || size > limits.max_size {
                return Err(format!(
                    "a {size}-byte message: this agent allows 1 to {} bytes (its --max-size)",
                    limits.max_size
                ));
            }
        }
        // Its message buffers, as the server's own check counts them (a sender's and a
        // receiver's per stream; the client here holds one role of each).
        let size = m.size.unwrap_or(128 << 10);
        let memory = size.saturating_mul(2).saturating_mul(u64::from(m.parallel));
        if memory > limits.max_memory {
            return Err(format!(
                "this test would take {memory} bytes of buffers on the agent, over its --max-memory of {} (fewer streams or smaller messages)",
                limits.max_memory
            ));
        }
        target_address(&m.target)?;
        Ok(())
    }
}

/// The target `HOST:PORT` (`[IPV6]:PORT`), resolved.
pub fn target_address(target: &str) -> Result<SocketAddr, String> {
    if target.is_empty()
        || target.len() > 255
        || target.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err("the mesh target must be HOST:PORT".into());
    }
    target
        .to_socket_addrs()
        .map_err(|e| format!("mesh target {target}: {e}"))?
        .next()
        .ok_or_else(|| format!("mesh target {target} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::WorkloadKind;

    #[test]
    fn sockets_are_listened_on_by_the_server_one_way_transports_by_their_reader() {
        let c = channels(TransportKind::Tcp, Wiring::Pair, &[Role::Sender; 2]);
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|c| c.server_listens && c.forward));
        assert_eq!(c[1].stream, 1);
        let c = channels(TransportKind::Fifo, Wiring::Pair, &[Role::Receiver]);
        assert_eq!(
            c,
            [Channel {
                stream: 0,
                server_listens: true,
                forward: true
            }]
        );
        let c = channels(TransportKind::Mq, Wiring::Pair, &[Role::Sender]);
        assert!(!c[0].server_listens);
        let c = channels(TransportKind::Shm, Wiring::Duplex, &[Role::Receiver]);
        assert_eq!(c.len(), 2);
        assert!(c[0].server_listens && c[0].forward);
        assert!(!c[1].server_listens && !c[1].forward);
        let c = channels(TransportKind::UnixDgram, Wiring::Duplex, &[Role::Sender; 3]);
        assert_eq!(c.len(), 3);
        assert!(channels(TransportKind::Tcp, Wiring::ListenDial, &[Role::Receiver; 4]).is_empty());
    }

    #[test]
    fn a_scenarios_channels_follow_its_workloads_wiring() {
        let mut sc = Scenario::new(WorkloadKind::Pingpong, TransportKind::Shm, 64);
        let c = channels_of(&sc, &[Role::Receiver]);
        assert_eq!(
            c,
            channels(TransportKind::Shm, Wiring::Duplex, &[Role::Receiver])
        );
        assert_eq!(c.len(), 2);
        sc = Scenario::new(WorkloadKind::Stream, TransportKind::Fifo, 65536);
        assert_eq!(channels_of(&sc, &[Role::Sender]).len(), 1);
        sc = Scenario::new(WorkloadKind::Connect, TransportKind::Tcp, 64);
        assert!(channels_of(&sc, &[Role::Receiver]).is_empty());
    }

    #[test]
    fn bidir_runs_the_second_half_of_the_streams_the_other_way() {
        assert_eq!(server_roles(2, Role::Receiver, false), [Role::Receiver; 2]);
        assert_eq!(
            server_roles(2, Role::Receiver, true),
            [Role::Receiver, Role::Receiver, Role::Sender, Role::Sender]
        );
        assert_eq!(
            server_roles(1, Role::Sender, true),
            [Role::Sender, Role::Receiver]
        );
        // A one-way transport's channel is opened by its reader: the server for the first
        // stream, the client for the second.
        let c = channels(
            TransportKind::Fifo,
            Wiring::Pair,
            &server_roles(1, Role::Receiver, true),
        );
        assert_eq!(
            c.iter()
                .map(|c| (c.stream, c.server_listens))
                .collect::<Vec<_>>(),
            [(0, true), (1, false)]
        );
    }

    #[test]
    fn signals_cross_as_they_were_sent() {
        for s in [
            PeerSignal::SenderDone,
            PeerSignal::ReceiverDone,
            PeerSignal::SetUp,
        ] {
            let m = SignalMsg::of(3, s);
            assert_eq!(m.stream, 3);
            assert_eq!(m.signal(), s);
            // Through JSON, as it crosses.
            let back: SignalMsg = serde_json::from_slice(&serde_json::to_vec(&m).unwrap()).unwrap();
            assert_eq!(back.signal(), s);
        }
        // The two signals every peer knows carry no field a peer before swarms refuses.
        let done = serde_json::to_string(&SignalMsg::of(0, PeerSignal::SenderDone)).unwrap();
        assert_eq!(done, r#"{"stream":0,"sender_done":true}"#);
    }
}

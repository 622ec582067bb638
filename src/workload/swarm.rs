//! `swarm`: N pairs at once, one reactor thread per side ([`crate::reactor`]), as one
//! stream of the runner. The sending role makes the pairs (dials them through the
//! scenario's listener, or makes socketpairs and pipes in this process) and drives their
//! active ends; the receiving role accepts them and drives the passive ends. Both make
//! their pairs before the start line, so the measured interval holds no set-up; the
//! making is timed on its own (`setup`).
//!
//! Each side reports its totals, its per-pair figure and its errors by kind
//! ([`SwarmSide`]); `sockbench swarm` folds the two into its document.

use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{
    Endpoint, Meter, PeerSignal, Role, Roles, Side, SideReport, Spec, Stop, TableKind, Tally,
    Wiring, Workload,
};
use crate::interrupt;
use crate::measure::live::Publisher;
use crate::reactor::{self, pairs, Work};
use crate::scenario::Scenario;
use crate::transport::TransportKind;

/// Most pairs in one swarm.
pub const MAX_PAIRS: u64 = 100_000;

/// How long the receiving side waits for the pairs the sending side dials before it
/// gives up.
const SETUP_LIMIT: Duration = Duration::from_secs(60);

/// What one side of a swarm counted, beyond what every role reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmSide {
    /// How long this side took to make (dial, or make in this process) or accept its
    /// pairs, in nanoseconds.
    pub setup_ns: u64,
    /// Bytes this side wrote, all pairs together.
    pub sent: u64,
    /// Bytes this side read, all pairs together (the drain after the interval included).
    pub received: u64,
    /// Bytes this side read before the measured interval ended.
    pub received_in_interval: u64,
    /// Per pair, in pair order, the figure this side's pairs are compared by: bytes read
    /// in the interval (passive ends), round trips (pingpong askers) or bytes written
    /// (stream writers).
    pub per_pair: Vec<u64>,
    /// The pairs (indices into `per_pair`) that met an error.
    pub failed: Vec<u32>,
    /// Errors by kind, with how many pairs each struck (set-up included).
    pub errors: Vec<(String, u64)>,
}

impl SwarmSide {
    /// The side's figures from its reactor's report; `setup` and `errors` from making
    /// its pairs.
    fn of(work: Work, role: reactor::Role, r: &reactor::ReactorReport, made: Made) -> SwarmSide {
        let Made {
            errors: mut errs,
            setup,
            numbers,
            ..
        } = made;
        // Each reactor end's pair number, and how many numbers there are (the ones this
        // side never got count as failed pairs).
        let numbers = numbers.unwrap_or_else(|| (0..r.pairs.len() as u32).collect());
        let len = numbers.last().map_or(0, |&n| n as usize + 1);
        let mut per_pair = vec![0; len];
        let mut ok = vec![false; len];
        for (c, &n) in r.pairs.iter().zip(&numbers) {
            let n = n as usize;
            ok[n] = true;
            per_pair[n] = match (work, role) {
                (_, reactor::Role::Passive) => c.received_in_interval,
                (Work::Pingpong, reactor::Role::Active) => c.round_trips,
                (Work::Stream, reactor::Role::Active) => c.sent,
            };
            if let Some(e) = &c.error {
                note(&mut errs, e.clone());
                ok[n] = false;
            }
        }
        let missing = ok.len() - numbers.len();
        if missing > 0 {
            for _ in 0..missing {
                note(&mut errs, "setup: dialed, never accepted".into());
            }
        }
        SwarmSide {
            setup_ns: u64::try_from(setup.as_nanos()).unwrap_or(u64::MAX),
            sent: r.pairs.iter().map(|c| c.sent).sum(),
            received: r.pairs.iter().map(|c| c.received).sum(),
            received_in_interval: r.pairs.iter().map(|c| c.received_in_interval).sum(),
            per_pair,
            failed: (0..len as u32).filter(|&n| !ok[n as usize]).collect(),
            errors: errs,
        }
    }
}

/// Count one more pair struck by an error of `kind`.
fn note(errors: &mut Vec<(String, u64)>, kind: String) {
    match errors.iter_mut().find(|(k, _)| *k == kind) {
        Some((_, n)) => *n += 1,
        None => errors.push((kind, 1)),
    }
}

/// A socket as a reactor's side: nonblocking, read and written through one descriptor.
fn socket_side(s: socket2::Socket) -> io::Result<reactor::Side> {
    s.set_nonblocking(true)?;
    Ok(reactor::Side {
        read: Some(OwnedFd::from(s)),
        write: None,
        duplex: true,
    })
}

/// The passive ends of pairs made in this process, handed from the sending role (which
/// makes them) to the receiving one.
type Handover = Mutex<Option<Vec<reactor::Side>>>;

/// The swarm workload for one run.
pub struct Swarm {
    work: Work,
    size: usize,
    duration: Duration,
    pairs: u64,
    transport: TransportKind,
    handover: Handover,
}

impl Swarm {
    /// The reactors' plan.
    fn plan(&self) -> reactor::Plan {
        reactor::Plan {
            work: self.work,
            size: self.size,
            duration: self.duration,
            drain: Duration::from_secs(5),
        }
    }

    /// Run one reactor over `ends`, measured by `meter` (started once the pairs were
    /// set up); the side's report.
    fn drive(
        &self,
        side: &Side,
        meter: &Meter,
        role: reactor::Role,
        mut made: Made,
    ) -> io::Result<SideReport> {
        let who = match role {
            reactor::Role::Active => Role::Sender,
            reactor::Role::Passive => Role::Receiver,
        };
        side.start.measuring_from(meter.t0());
        let mut live = Publisher::new(side.start.live(), who, None);
        let mut progress = |bytes, messages| live.publish(bytes, messages);
        let mut start = || meter.t0();
        // Each side says when its reactor has ended, so the other's drain waits for it.
        let (mine, theirs) = match role {
            reactor::Role::Active => (PeerSignal::SenderDone, PeerSignal::ReceiverDone),
            reactor::Role::Passive => (PeerSignal::ReceiverDone, PeerSignal::SenderDone),
        };
        let mut peer_finished = || side.link.has(theirs);
        let ran = reactor::run(
            role,
            &self.plan(),
            std::mem::take(&mut made.ends),
            &mut start,
            &mut progress,
            &mut peer_finished,
        );
        side.link.signal(mine);
        let mut r = ran?;
        let ends = std::mem::take(&mut r.ends);
        if r.interrupted {
            // After Ctrl-C the report must not wait for ten thousand closes (the process
            // is about to exit): a thread of their own closes them. (If none can be
            // started, they are closed at once.)
            let closer = std::thread::Builder::new().name("sb-swarm-close".into());
            let _ = closer.spawn(move || drop(ends));
        } else {
            // Before the next run opens as many again.
            drop(ends);
        }
        let mut report = meter.stop(None, side.conn.as_ref());
        let swarm = SwarmSide::of(self.work, role, &r, made);
        report.elapsed = Some(r.interval);
        report.interrupted = r.interrupted;
        // What the run counts of this side (what --interval's last line is closed with):
        // an asker's round trips, a writer's bytes, a reader's bytes within the interval
        // (its drain is counted apart, in `swarm.received`).
        let size = self.size as u64;
        (report.bytes, report.messages) = match (self.work, role) {
            (Work::Pingpong, reactor::Role::Active) => {
                let trips: u64 = swarm.per_pair.iter().sum();
                (trips * size, trips)
            }
            (_, reactor::Role::Active) => (swarm.sent, swarm.sent.div_ceil(size)),
            (_, reactor::Role::Passive) => (
                swarm.received_in_interval,
                swarm.received_in_interval.div_ceil(size),
            ),
        };
        if let Some(h) = r.latency.filter(|h| !h.is_empty()) {
            report
                .latencies
                .push((crate::measure::latency::LatencyKind::RoundTrip, h));
        }
        report.swarm = Some(swarm);
        Ok(report)
    }

    /// Dial every pair through `dialer` (a failed dial is counted by its error, and the
    /// others go on).
    fn dial(&self, dialer: &crate::transport::connector::Dialer) -> Made {
        let began = Instant::now();
        let mut ends = Vec::with_capacity(self.pairs as usize);
        let mut errors = Vec::new();
        for _ in 0..self.pairs {
            if interrupt::requested() {
                break;
            }
            // Each pair's first bytes are its number, so the accepting side puts its
            // ends in the same order whatever order the kernel queued them in.
            let number = (ends.len() as u32).to_le_bytes();
            let made = dialer
                .connect_socket()
                .and_then(|s| (&s).write_all(&number).map(|()| s))
                .and_then(socket_side);
            match made {
                Ok(s) => ends.push(s),
                Err(e) => note(&mut errors, format!("setup: connect: {e}")),
            }
        }
        Made {
            ends,
            errors,
            setup: began.elapsed(),
            numbers: None,
        }
    }

    /// Accept the pairs the sending side dials, until it says it is done and none is
    /// left pending.
    fn accept(
        &self,
        listener: &crate::transport::connector::Listener,
        link: &super::PeerLink,
    ) -> io::Result<Made> {
        let began = Instant::now();
        // By pair number (the first bytes of each connection).
        let mut slots: Vec<Option<reactor::Side>> = (0..self.pairs).map(|_| None).collect();
        let mut got = 0u64;
        let mut errors = Vec::new();
        let mut dialed = false;
        while got < self.pairs && !interrupt::requested() {
            // Every connection the dialer made is pending once it says it is done.
            dialed = dialed || link.has(PeerSignal::SetUp);
            let wait = if dialed {
                Duration::ZERO
            } else {
                Duration::from_millis(20)
            };
            if !listener.ready(wait)? {
                if dialed {
                    break;
                }
                if began.elapsed() > SETUP_LIMIT {
                    return Err(io::Error::other(format!(
                        "{got} of {} pairs arrived in {} s: the dialing side is stuck",
                        self.pairs,
                        SETUP_LIMIT.as_secs()
                    )));
                }
                continue;
            }
            match listener.accept_socket() {
                Ok(s) => match free_slot(&slots, pair_number(&s)) {
                    Some(n) => {
                        slots[n] = Some(socket_side(s)?);
                        got += 1;
                    }
                    _ => note(
                        &mut errors,
                        "setup: a connection that named no pair of this run".into(),
                    ),
                },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A connection its dialer gave up on: that pair's loss.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {
                    note(&mut errors, format!("setup: accept: {e}"));
                }
                // Out of descriptors or memory: the connection stays queued, and no
                // retry would take it.
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot accept the pairs' connections: {e}"),
                    ))
                }
            }
        }
        // The ends in pair order; a number below the highest that never came is a pair
        // the dialer made and this side never got.
        let mut ends = Vec::with_capacity(got as usize);
        let mut numbers = Vec::with_capacity(got as usize);
        for (n, slot) in slots.into_iter().enumerate() {
            if let Some(end) = slot {
                ends.push(end);
                numbers.push(n as u32);
            }
        }
        Ok(Made {
            ends,
            errors,
            setup: began.elapsed(),
            numbers: Some(numbers),
        })
    }

    /// Make every pair in this process (socketpairs, pipes): the active ends and what
    /// failed; the passive ends go to the receiving role.
    fn make(&self) -> io::Result<Made> {
        let began = Instant::now();
        let made = pairs::make(self.transport, self.work, self.pairs)
            .map_err(|e| io::Error::other(format!("{e:#}")))?;
        let (active, passive): (Vec<_>, Vec<_>) = made.pairs.into_iter().unzip();
        *self.handover.lock().unwrap_or_else(|e| e.into_inner()) = Some(passive);
        Ok(Made {
            ends: active,
            errors: made.errors,
            setup: began.elapsed(),
            numbers: None,
        })
    }

    /// The passive ends the sending role made in this process: none if it could not
    /// make them, or on Ctrl-C.
    fn take_made(&self, link: &super::PeerLink) -> Made {
        let began = Instant::now();
        // The ends are handed over before the sender says it is set up.
        while !link.wait_for(PeerSignal::SetUp, Duration::from_millis(20)) {
            if interrupt::requested() {
                break;
            }
        }
        let ends = (self.handover.lock().unwrap_or_else(|e| e.into_inner()))
            .take()
            .unwrap_or_default();
        Made {
            ends,
            errors: Vec::new(),
            setup: began.elapsed(),
            numbers: None,
        }
    }

    /// Wait until the receiving side has every pair too (or is gone, or Ctrl-C).
    fn await_receiver(link: &super::PeerLink) {
        while !link.wait_for(PeerSignal::SetUp, Duration::from_millis(20)) {
            if interrupt::requested() {
                return;
            }
        }
    }
}

/// One side's pairs as it set them up.
struct Made {
    /// Its end of each pair.
    ends: Vec<reactor::Side>,
    /// What failed, by kind.
    errors: Vec<(String, u64)>,
    /// How long it took.
    setup: Duration,
    /// Each end's pair number, when this side did not make them in order (None: the
    /// ends are pairs 0, 1, 2...).
    numbers: Option<Vec<u32>>,
}

/// The pair number a dialed connection opens with (None if it sent none in time).
fn pair_number(s: &socket2::Socket) -> Option<u64> {
    let mut number = [0u8; 4];
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    (&*s).read_exact(&mut number).ok()?;
    s.set_read_timeout(None).ok()?;
    Some(u64::from(u32::from_le_bytes(number)))
}

/// The slot a connection that named pair `number` takes: none for a number beyond the
/// run's pairs or one already taken (a stranger, or a connection sent twice).
fn free_slot<T>(slots: &[Option<T>], number: Option<u64>) -> Option<usize> {
    let n = usize::try_from(number?).ok()?;
    slots.get(n)?.is_none().then_some(n)
}

/// Both roles meet at the start line, then set their pairs up together (the sender
/// dials or makes them, the receiver accepts or takes them), each telling the other when
/// it is done; each side's measured interval begins once both are.
impl Workload for Swarm {
    fn sender(&self, mut side: Side) -> io::Result<SideReport> {
        let endpoint = side.endpoint.take();
        let (meter, made) = Meter::start_after(&side.start, || {
            crate::testhooks::hold("swarm-setup");
            let made = match endpoint {
                Some(Endpoint::Dial(dialer)) => Ok(self.dial(&dialer)),
                Some(Endpoint::Listen(_)) => {
                    Err(io::Error::other("swarm's sending role got a listener"))
                }
                None => self.make(),
            };
            // Said even when nothing was made, so the receiver never waits for it.
            side.link.signal(PeerSignal::SetUp);
            if made.is_ok() {
                Swarm::await_receiver(&side.link);
            }
            crate::testhooks::hold("swarm-run");
            made
        });
        self.drive(&side, &meter, reactor::Role::Active, made?)
    }

    fn receiver(&self, mut side: Side) -> io::Result<SideReport> {
        let endpoint = side.endpoint.take();
        let (meter, made) = Meter::start_after(&side.start, || {
            let made = match endpoint {
                Some(Endpoint::Listen(listener)) => self.accept(&listener, &side.link),
                Some(Endpoint::Dial(_)) => {
                    Err(io::Error::other("swarm's receiving role got a dialer"))
                }
                None => Ok(self.take_made(&side.link)),
            };
            side.link.signal(PeerSignal::SetUp);
            made
        });
        self.drive(&side, &meter, reactor::Role::Passive, made?)
    }
}

/// `swarm` as the plan and the runner see it.
pub struct SwarmSpec;

/// The transports whose pairs are dialed through a listener (the others are made in
/// one process).
fn dialed(t: TransportKind) -> bool {
    matches!(
        t,
        TransportKind::Unix
            | TransportKind::UnixSeqpacket
            | TransportKind::Tcp
            | TransportKind::Tcp6
    )
}

/// What a swarm of `work` is judged by (`compare`'s rows, and the spec): its aggregate
/// throughput for a stream, its round trips a second for pingpong.
pub fn headline(work: Work) -> crate::measure::headline::Headline {
    use crate::measure::headline::Headline;
    match work {
        Work::Stream => Headline::throughput("bits_per_second"),
        Work::Pingpong => Headline::rate("round_trips_per_second"),
    }
}

impl Spec for SwarmSpec {
    fn wiring(&self, transport: TransportKind) -> Wiring {
        if dialed(transport) {
            Wiring::ListenDial
        } else {
            Wiring::InProcess
        }
    }

    fn table(&self) -> TableKind {
        TableKind::Throughput
    }

    /// A stream's (the default work's); a swarm's rows name their work's: [`headline`].
    fn headline(&self) -> crate::measure::headline::Headline {
        headline(Work::Stream)
    }

    fn headline_of(&self, run: &crate::results::RunFigures) -> Option<f64> {
        Some(run.bits_per_second)
    }

    fn transports(&self) -> &'static [TransportKind] {
        &pairs::TRANSPORTS
    }

    fn refuses_on_server(&self, _sc: &Scenario, peer: crate::vocab::Peer) -> Option<String> {
        // Its pairs are not bounded by a server's stream, memory or descriptor limits.
        (peer != crate::vocab::Peer::Parent)
            .then(|| "a swarm runs only with --placement processes, not against a server".into())
    }

    fn refuses(&self, sc: &Scenario) -> Option<String> {
        let t = sc.transport;
        if !pairs::TRANSPORTS.contains(&t) {
            let names: Vec<&str> = pairs::TRANSPORTS.iter().map(|t| t.name()).collect();
            return Some(format!(
                "swarm cannot use transport '{t}': use one of {} (stream transports with a listener, socketpair and pipe)",
                names.join(", ")
            ));
        }
        let pairs = sc.extras.swarm.map_or(0, |s| s.pairs);
        if pairs == 0 || pairs > MAX_PAIRS {
            return Some(format!("-n must be between 1 and {MAX_PAIRS}"));
        }
        if !matches!(sc.stop, Stop::Duration(_)) {
            return Some("a swarm runs for a duration (-d)".into());
        }
        None
    }

    fn roles(&self, sc: &Scenario, stop: Stop) -> Arc<dyn Workload> {
        let options = sc.extras.swarm.unwrap_or_default();
        let duration = match stop {
            Stop::Duration(d) => d,
            // Refused by the plan; a warm-up is always timed.
            Stop::Count(_) | Stop::Bytes(_) => Duration::ZERO,
        };
        Arc::new(Swarm {
            work: options.work,
            size: sc.size as usize,
            duration,
            pairs: options.pairs,
            transport: sc.transport,
            handover: Mutex::new(None),
        })
    }

    /// A stream is timed by its readers (what was delivered), a pingpong by its askers.
    fn tally(&self, sc: &Scenario, roles: &Roles) -> Tally {
        let work = sc.extras.swarm.unwrap_or_default().work;
        let side = |of: &[SideReport], f: fn(&SwarmSide) -> u64| -> u64 {
            of.iter().filter_map(|s| s.swarm.as_ref()).map(f).sum()
        };
        match work {
            Work::Stream => {
                let bytes = side(&roles.receivers, |s| s.received_in_interval);
                Tally {
                    bytes_received: bytes,
                    messages_received: bytes.div_ceil(sc.size.max(1)),
                    delivered_bytes: bytes,
                    counted: bytes.div_ceil(sc.size.max(1)),
                    ..Tally::timed_by(Role::Receiver)
                }
            }
            Work::Pingpong => {
                let trips = Roles::sum(&roles.senders, |s| s.messages);
                Tally {
                    bytes_received: trips * sc.size,
                    messages_received: trips,
                    delivered_bytes: trips * sc.size,
                    counted: trips,
                    ..Tally::timed_by(Role::Sender)
                }
            }
        }
    }

    fn sets_up_after_the_line(&self) -> bool {
        true
    }

    /// Setting the pairs up may take [`SETUP_LIMIT`], and the drain waits up to the
    /// reactor's limit for a starved side.
    fn set_up_allowance(&self) -> Duration {
        SETUP_LIMIT + reactor::STUCK
    }

    /// A stream: what the reading ends read in the interval, else what the writing ends
    /// wrote; a pingpong: the askers' round trips, else the answering ends' requests.
    fn watched(&self, sc: &Scenario) -> [(Role, crate::measure::live::Watch); 2] {
        use crate::measure::live::Watch;
        match sc.extras.swarm.unwrap_or_default().work {
            Work::Stream => [
                (Role::Receiver, Watch::Receiver),
                (Role::Sender, Watch::Sender),
            ],
            Work::Pingpong => [
                (Role::Sender, Watch::Client),
                (Role::Receiver, Watch::Receiver),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::SwarmOptions;

    #[test]
    fn a_swarm_is_judged_by_its_works_figure_and_the_spec_by_a_streams() {
        let stream = headline(Work::Stream);
        assert_eq!(
            (stream.name, stream.higher_is_better),
            ("bits_per_second", true)
        );
        let pingpong = headline(Work::Pingpong);
        assert_eq!(
            (pingpong.name, pingpong.higher_is_better),
            ("round_trips_per_second", true)
        );
        assert_eq!(SwarmSpec.headline(), stream);
    }

    #[test]
    fn errors_are_counted_per_kind_in_the_order_first_seen() {
        let mut errors = Vec::new();
        for kind in [
            "setup: connect: refused",
            "reset",
            "setup: connect: refused",
        ] {
            note(&mut errors, kind.to_string());
        }
        note(&mut errors, "setup: connect: refused".to_string());
        assert_eq!(
            errors,
            vec![
                ("setup: connect: refused".to_string(), 3),
                ("reset".to_string(), 1)
            ]
        );
    }

    #[test]
    fn a_connection_takes_only_a_free_slot_of_this_run() {
        let slots = [None, Some(()), None];
        assert_eq!(free_slot(&slots, Some(0)), Some(0));
        assert_eq!(free_slot(&slots, Some(2)), Some(2));
        // Taken, beyond the last pair, far beyond it, or no number at all.
        assert_eq!(free_slot(&slots, Some(1)), None);
        assert_eq!(free_slot(&slots, Some(3)), None);
        assert_eq!(free_slot(&slots, Some(u64::from(u32::MAX))), None);
        assert_eq!(free_slot(&slots, None), None);
    }

    /// A swarm scenario of `work` at 100-byte messages.
    fn swarm_scenario(work: Work) -> Scenario {
        let mut sc = Scenario::new(
            crate::scenario::WorkloadKind::Stream,
            TransportKind::Tcp,
            100,
        );
        sc.workload = crate::scenario::WorkloadKind::Swarm;
        sc.extras.swarm = Some(SwarmOptions { pairs: 4, work });
        sc
    }

    #[test]
    fn a_stream_swarm_is_timed_and_counted_by_its_readers_a_pingpong_by_its_askers() {
        let swarm = |received_in_interval| SideReport {
            swarm: Some(SwarmSide {
                received_in_interval,
                ..SwarmSide::default()
            }),
            ..SideReport::default()
        };
        let roles = Roles {
            // The askers' round trips; what the readers read in the interval.
            senders: vec![SideReport {
                messages: 7,
                ..swarm(0)
            }],
            receivers: vec![swarm(1000), swarm(250)],
            ..Roles::default()
        };
        let t = SwarmSpec.tally(&swarm_scenario(Work::Stream), &roles);
        assert_eq!(t.clock, Role::Receiver);
        assert_eq!(
            (
                t.bytes_received,
                t.messages_received,
                t.delivered_bytes,
                t.counted
            ),
            (1250, 13, 1250, 13)
        );
        let t = SwarmSpec.tally(&swarm_scenario(Work::Pingpong), &roles);
        assert_eq!(t.clock, Role::Sender);
        assert_eq!(
            (
                t.bytes_received,
                t.messages_received,
                t.delivered_bytes,
                t.counted
            ),
            (700, 7, 700, 7)
        );
    }

    #[test]
    fn a_swarm_run_is_allowed_its_set_up_and_its_drain_beyond_its_duration() {
        assert_eq!(SwarmSpec.set_up_allowance(), SETUP_LIMIT + reactor::STUCK);
        assert!(reactor::STUCK > Duration::ZERO);
    }
}

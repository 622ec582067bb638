//! Both roles of every stream as threads of this process (pinned with `--cpus`): open
//! the transport, warm up on a throwaway connection, start every role together at one
//! start line, and bring back what each role measured.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use super::{Placement, RunError};
use crate::interrupt;
use crate::measure::cpu::{SystemCpu, SystemTicks};
use crate::measure::netstat::udp_rcvbuf_errors;
use crate::scenario::Scenario;
use crate::scenario::Stop;
use crate::transport::connector;
use crate::transport::{
    open_duplex, open_pair, unconnected, Pair, RunDir, TransportKind, TransportOptions,
};
use crate::vocab::Role;
use crate::workload::{peer_link, spec, Endpoint, Roles, Side, SideReport, StartLine, Wiring};

/// How long a run may take beyond its planned duration before it is declared stalled.
const STALL_GRACE: Duration = Duration::from_secs(15);
/// How long after Ctrl-C the runner waits for the sides before it leaves them behind
/// (the process exits, and they with it: the whole stop is promised within 100 ms).
const INTERRUPT_GRACE: Duration = Duration::from_millis(50);

/// Roles as threads of this process.
pub struct Threads {
    /// `--path`: where socket files and FIFOs go (None: a private temporary directory).
    path: Option<PathBuf>,
    /// Makes file-system names unique within the process.
    next_id: AtomicUsize,
}

impl Threads {
    /// Threads that make their socket files and FIFOs under `path` (or a private
    /// directory).
    pub fn new(path: Option<PathBuf>) -> Threads {
        Threads {
            path,
            next_id: AtomicUsize::new(0),
        }
    }

    fn transport_options(&self, sc: &Scenario, dir: Option<&RunDir>) -> TransportOptions {
        TransportOptions {
            sndbuf: sc.sndbuf.map(|n| n as usize),
            rcvbuf: sc.rcvbuf.map(|n| n as usize),
            nodelay: sc.nodelay,
            bind: sc.bind,
            connect: sc.connect,
            dir: dir.map(RunDir::path).unwrap_or_default(),
            message_bytes: sc.size as usize,
            peer_uid: None,
            accept_wait: None,
            token: None,
        }
    }
}

impl Placement for Threads {
    fn name(&self) -> &'static str {
        "threads"
    }

    /// One run: open `parallel` pairs, start all sides at once, wait for their reports.
    fn run(&self, sc: &Scenario, stop: Stop) -> Result<Roles, RunError> {
        if interrupt::requested() {
            return Err(RunError::Interrupted);
        }
        let dir = if sc.transport.uses_path() {
            Some(RunDir::open(self.path.as_ref()).map_err(RunError::Failed)?)
        } else {
            None
        };
        let opts = self.transport_options(sc, dir.as_ref());
        let engine = sc.engine.engine_for(sc.extras.engine_options());
        let workload = spec(sc.workload).roles(sc, stop);
        let streams = sc.parallel as usize;
        let mut pairs = Vec::with_capacity(streams);
        let opening = Instant::now();
        for _ in 0..streams {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let opened = match spec(sc.workload).wiring(sc.transport) {
                Wiring::Pair => open_pair(sc.transport, &opts, id).map(|p| (p, None)),
                Wiring::Duplex => open_duplex(sc.transport, &opts, id).map(|p| (p, None)),
                // The workload makes its own (both roles are threads of this process).
                Wiring::InProcess => Ok((
                    Pair {
                        sender: unconnected(),
                        receiver: unconnected(),
                        info: crate::transport::LinkInfo::default(),
                    },
                    None,
                )),
                Wiring::ListenDial => connector::open(sc.transport, &opts, id, sc.extras.linger0)
                    .map(|(l, d, info)| {
                        let pair = Pair {
                            sender: unconnected(),
                            receiver: unconnected(),
                            info,
                        };
                        (
                            pair,
                            Some((Endpoint::Dial(Box::new(d)), Endpoint::Listen(l))),
                        )
                    }),
            };
            let pair = match opened {
                Ok(p) => p,
                Err(_) if interrupt::requested() => return Err(RunError::Interrupted),
                Err(e) => return Err(RunError::Failed(explain_fd_limit(e))),
            };
            pairs.push(pair);
        }
        let connect_time = opening.elapsed() / streams as u32;
        drop(dir); // every name in it is gone already
        let link = pairs[0].0.info.clone();
        let start = StartLine::for_scenario(2 * streams + 1, sc);
        let cpus = crate::testhooks::alternate_cpus().or(sc.cpus);
        let (tx, rx) = mpsc::channel::<(Role, std::io::Result<SideReport>)>();
        let mut handles: Vec<JoinHandle<()>> = Vec::new();
        for (i, (pair, endpoints)) in pairs.into_iter().enumerate() {
            let (send_link, recv_link) = peer_link();
            let (send_ep, recv_ep) = match endpoints {
                Some((d, l)) => (Some(d), Some(l)),
                None => (None, None),
            };
            let sender = engine
                .attach(pair.sender)
                .context("the engine cannot take the sending end")?;
            let receiver = engine
                .attach(pair.receiver)
                .context("the engine cannot take the receiving end")?;
            for (role, conn, endpoint, link, cpu) in [
                (
                    Role::Receiver,
                    receiver,
                    recv_ep,
                    recv_link,
                    cpus.map(|c| c.1),
                ),
                (Role::Sender, sender, send_ep, send_link, cpus.map(|c| c.0)),
            ] {
                let side = Side {
                    conn,
                    endpoint,
                    link,
                    start: start.for_side(),
                };
                let spawned =
                    super::spawn_role(role, i, side, Arc::clone(&workload), cpu, tx.clone());
                match spawned {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        // The sides already started are waiting at the start: let them go;
                        // they end at once, their peers' ends closing with this scope.
                        start.open();
                        return Err(RunError::Failed(e));
                    }
                }
            }
        }
        drop(tx);
        let udp6 = sc.transport == TransportKind::Udp6;
        let udp_before = (!sc.transport.reliable())
            .then(|| udp_rcvbuf_errors(udp6))
            .flatten();
        // The sides may still be filling large buffers: Ctrl-C must not wait for that.
        if !start.wait_unless_interrupted() {
            return Err(RunError::Interrupted);
        }
        let t0 = SystemTicks::now();
        let started = Instant::now();
        let limit = match stop {
            Stop::Duration(d) => Some(d + STALL_GRACE + spec(sc.workload).set_up_allowance()),
            _ => None,
        };
        let (mut senders, mut receivers) = (Vec::new(), Vec::new());
        let mut interrupted_at: Option<Instant> = None;
        let mut failure = super::FirstCause::default();
        while senders.len() + receivers.len() < 2 * streams {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok((role, Ok(r))) => match role {
                    Role::Sender => senders.push(r),
                    Role::Receiver => receivers.push(r),
                },
                Ok((role, Err(e))) => {
                    let side = if role == Role::Sender {
                        "sender"
                    } else {
                        "receiver"
                    };
                    failure.record(e, || format!("{} {side} failed", sc.transport));
                    // Count it so the loop can end when the others finish.
                    match role {
                        Role::Sender => senders.push(SideReport::default()),
                        Role::Receiver => receivers.push(SideReport::default()),
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if interrupt::requested()
                && interrupted_at.get_or_insert_with(Instant::now).elapsed() > INTERRUPT_GRACE
            {
                return Err(RunError::Interrupted);
            }
            if failure
                .since()
                .is_some_and(|at| at.elapsed() > Duration::from_secs(1))
            {
                break;
            }
            if limit.is_some_and(|l| started.elapsed() > l) {
                return Err(RunError::Failed(anyhow!(
                    "{} run stalled: no end after {:.0} s; the transport may be wedged",
                    sc.transport,
                    started.elapsed().as_secs_f64()
                )));
            }
        }
        let t1 = SystemTicks::now();
        let udp_drops = udp_before
            .zip(udp_rcvbuf_errors(udp6))
            .map(|(a, b)| b.saturating_sub(a));
        if let Some(e) = failure.take() {
            // A side that gave up because of Ctrl-C (a send cut short, a dial abandoned)
            // is the interruption, not a failure.
            if interrupt::requested() {
                return Err(RunError::Interrupted);
            }
            return Err(RunError::Failed(explain_fd_limit(e)));
        }
        for h in handles {
            let _ = h.join();
        }
        // A run Ctrl-C cut short comes back with what it measured, its roles saying so.
        if crate::testhooks::fault("receiver-counts-one-more") {
            if let Some(r) = receivers.first_mut() {
                r.messages += 1;
                r.bytes += 1;
            }
        }
        // Socket buffers as they ended up (TCP autotuning grows them during the run).
        let mut link = link;
        if let Some(s) = senders.first().and_then(|s| s.socket_buffers.0) {
            link.sndbuf_bytes = Some(s);
        }
        if let Some(r) = receivers.first().and_then(|r| r.socket_buffers.1) {
            link.rcvbuf_bytes = Some(r);
        }
        Ok(Roles {
            senders,
            receivers,
            system: t0.zip(t1).and_then(|(a, b)| SystemCpu::between(&a, &b)),
            link,
            udp_drops,
            connect_time,
            peer: None,
            directions: Vec::new(),
        })
    }
}

/// Add a hint when setup failed for lack of file descriptors.
fn explain_fd_limit(e: anyhow::Error) -> anyhow::Error {
    let out_of_fds = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            .is_some_and(|n| n == nix::libc::EMFILE || n == nix::libc::ENFILE)
    });
    // EMFILE also means other things (a message queue over RLIMIT_MSGQUEUE): blame the
    // descriptor limit only when this process really is at it.
    if !out_of_fds || !crate::transport::at_descriptor_limit() {
        return e;
    }
    let limit = crate::transport::descriptors()
        .map_or_else(|| "unknown".into(), |(_, soft)| soft.to_string());
    e.context(format!(
        "out of file descriptors (the limit is {limit}, see `ulimit -n`): raise the limit or use fewer --parallel streams"
    ))
}

//! Runs a plan: per scenario, per run, open the transport, warm up on a throwaway
//! connection, start both sides together, collect what each measured, and turn it into
//! figures; export after every scenario.
//!
//! Placement: today both sides are threads of this process (pinned with `--cpus`); the
//! sides only share the transport and a peer link, so another placement only changes how
//! they are started.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use hdrhistogram::Histogram;

use crate::interrupt;
use crate::measure::cpu::{SystemCpu, SystemTicks};
use crate::measure::histogram::{fraction_at_least, merge, Latency};
use crate::measure::netstat::udp_rcvbuf_errors;
use crate::measure::stats::{median, Summary};
use crate::measure::units::format_bytes;
use crate::plan::{Plan, Scenario};
use crate::report::progress::Progress;
use crate::report::{
    ExportManager, Phases, Report, RunFigures, ScenarioOptions, ScenarioResult, SideFigures,
    Statistics, Warning,
};
use crate::transport::connector;
use crate::transport::{open_duplex, open_pair, LinkInfo, TransportKind, TransportOptions};
use crate::transport::{unconnected, Pair};
use crate::workload::connect::Connect;
use crate::workload::pingpong::PingPong;
use crate::workload::rate::Rate;
use crate::workload::stream::Stream;
use crate::workload::Endpoint;
use crate::workload::WorkloadKind;
use crate::workload::{peer_link, Side, SideReport, StartLine, Stop, Workload};

/// How long a run may take beyond its planned duration before it is declared stalled.
const STALL_GRACE: Duration = Duration::from_secs(15);
/// How long after Ctrl-C the runner waits for the sides before it leaves them behind.
const INTERRUPT_GRACE: Duration = Duration::from_millis(600);
/// A side thread's CPU use above this fraction of a core counts as saturated.
const SATURATED: f64 = 0.9;
/// The shortest measured interval a CPU-bound verdict is drawn from.
const MIN_JUDGED_SECONDS: f64 = 0.1;
/// Runs shorter than this have no machine-wide CPU figure: /proc/stat's ticks are 10 ms.
const MIN_SYSTEM_SECONDS: f64 = 0.05;
/// Coefficient of variation above which runs are said to disagree.
const UNSTABLE_CV: f64 = 0.05;

/// Where one run makes its socket files and FIFOs: `--path`, or a private directory that
/// exists only while the run opens its transports (every name in it is removed as soon
/// as both ends are open, and then the directory goes too, so a killed run leaves
/// nothing).
enum RunDir {
    Private(tempfile::TempDir),
    User(PathBuf),
}

impl RunDir {
    fn open(user: Option<&PathBuf>) -> anyhow::Result<RunDir> {
        if let Some(p) = user {
            return Ok(RunDir::User(p.clone()));
        }
        let base = crate::plan::default_dir_base();
        tempfile::Builder::new()
            .prefix(&format!("sockbench-{}-", std::process::id()))
            .rand_bytes(6)
            .tempdir_in(&base)
            .map(RunDir::Private)
            .with_context(|| {
                format!(
                    "cannot create a private directory for socket files in {}: give a writable directory \
                     with --path (or set TMPDIR)",
                    base.display()
                )
            })
    }

    fn path(&self) -> PathBuf {
        match self {
            RunDir::Private(t) => t.path().to_path_buf(),
            RunDir::User(p) => p.clone(),
        }
    }
}

/// Why a run did not produce figures.
enum RunError {
    Interrupted,
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for RunError {
    fn from(e: anyhow::Error) -> Self {
        RunError::Failed(e)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Sender,
    Receiver,
}

/// One measured run, before it becomes figures.
struct Raw {
    senders: Vec<SideReport>,
    receivers: Vec<SideReport>,
    system: Option<SystemCpu>,
    link: LinkInfo,
    /// UDP receive-buffer drops the kernel counted during the run.
    udp_drops: Option<u64>,
    /// Time to open one stream's transport (the average over streams).
    connect_time: Duration,
}

/// Runs a plan and fills a report.
pub struct Runner<'a> {
    plan: &'a Plan,
    exports: &'a ExportManager,
    next_id: AtomicUsize,
}

impl<'a> Runner<'a> {
    /// A runner for `plan` that writes `exports` after every scenario.
    pub fn new(plan: &'a Plan, exports: &'a ExportManager) -> Runner<'a> {
        Runner {
            plan,
            exports,
            next_id: AtomicUsize::new(0),
        }
    }

    /// Run every scenario, appending results to `report`. Stops early on Ctrl-C (the
    /// report then says `interrupted`). A failed scenario is recorded and the rest go on.
    ///
    /// # Errors
    /// None today: failures are the scenarios' own; the signature leaves room for
    /// failures outside any scenario.
    pub fn run(&mut self, report: &mut Report) -> anyhow::Result<()> {
        if self
            .plan
            .scenarios
            .iter()
            .any(|s| matches!(s.transport, TransportKind::Mq | TransportKind::Shm))
        {
            for note in crate::transport::remove_stale_ipc() {
                eprintln!("sockbench: note: {note}");
                report.warnings.push(note);
            }
        }
        if self.plan.scenarios.iter().any(|s| s.transport.uses_path()) {
            // What a killed sockbench left where this run makes its names.
            let dir = self
                .plan
                .path
                .clone()
                .unwrap_or_else(crate::plan::default_dir_base);
            for note in crate::transport::remove_stale(&dir) {
                eprintln!("sockbench: note: {note}");
                report.warnings.push(note);
            }
        }
        let progress = Progress::new(self.plan.scenarios.len() as u64, self.plan.output.quiet);
        for sc in &self.plan.scenarios {
            progress.set_message(format!(
                "{} {} {}",
                sc.workload,
                sc.transport,
                format_bytes(sc.size)
            ));
            match self.scenario(sc) {
                Some(result) => report.results.push(result),
                None => {
                    report.interrupted = true;
                    break;
                }
            }
            progress.inc();
            self.exports.after_scenario(report);
            if interrupt::requested() {
                report.interrupted = true;
                break;
            }
        }
        progress.finish();
        Ok(())
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
        }
    }

    /// All runs of a scenario; `None` if Ctrl-C came before any finished (after some, a
    /// result with the finished runs and a warning). A failure is a result whose `error`
    /// says why.
    fn scenario(&self, sc: &Scenario) -> Option<ScenarioResult> {
        let mut raws = Vec::new();
        let mut error = None;
        let mut interrupted = false;
        for _ in 0..sc.runs {
            let outcome = (|| {
                if !sc.warmup.is_zero() {
                    self.run_once(sc, Stop::Duration(sc.warmup))?;
                }
                self.run_once(sc, sc.stop)
            })();
            match outcome {
                Ok(raw) => raws.push(raw),
                Err(RunError::Interrupted) if raws.is_empty() => return None,
                Err(RunError::Interrupted) => {
                    interrupted = true;
                    break;
                }
                Err(RunError::Failed(e)) => {
                    error = Some(format!("{e:#}"));
                    break;
                }
            }
        }
        let mut result = figures(sc, &raws);
        result.error = error.or_else(|| check_agreement(sc, &result));
        if interrupted {
            result.warnings.push(Warning {
                kind: "interrupted".into(),
                message: format!("interrupted after {} of {} runs", raws.len(), sc.runs),
            });
        }
        Some(result)
    }

    fn workload(&self, sc: &Scenario, stop: Stop) -> Arc<dyn Workload> {
        let (size, framing, reliable) = (
            sc.size as usize,
            sc.transport.framing(),
            sc.transport.reliable(),
        );
        match sc.workload {
            WorkloadKind::Pingpong => Arc::new(PingPong {
                size,
                stop,
                framing,
                reliable,
                rate: sc.extras.rate,
                writes: sc.extras.writes,
            }),
            WorkloadKind::Connect => Arc::new(Connect {
                size,
                stop,
                framing,
                open: sc.extras.open,
            }),
            WorkloadKind::Rate => Arc::new(Rate {
                size,
                stop,
                framing,
                reliable,
                rate: sc.extras.rate,
            }),
            _ => Arc::new(Stream {
                size,
                stop,
                framing,
                reliable,
            }),
        }
    }

    /// One run: open `parallel` pairs, start all sides at once, wait for their reports.
    fn run_once(&self, sc: &Scenario, stop: Stop) -> Result<Raw, RunError> {
        if interrupt::requested() {
            return Err(RunError::Interrupted);
        }
        let dir = if sc.transport.uses_path() {
            Some(RunDir::open(self.plan.path.as_ref()).map_err(RunError::Failed)?)
        } else {
            None
        };
        let opts = self.transport_options(sc, dir.as_ref());
        let engine = sc.engine.engine_with(sc.extras.runtime);
        let workload = self.workload(sc, stop);
        let streams = sc.parallel as usize;
        let mut pairs = Vec::with_capacity(streams);
        let opening = Instant::now();
        for _ in 0..streams {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let opened = match sc.workload {
                WorkloadKind::Stream => open_pair(sc.transport, &opts, id).map(|p| (p, None)),
                WorkloadKind::Connect => {
                    connector::open(sc.transport, &opts, id, sc.extras.linger0).map(
                        |(l, d, info)| {
                            let pair = Pair {
                                sender: unconnected(),
                                receiver: unconnected(),
                                info,
                            };
                            (
                                pair,
                                Some((Endpoint::Dial(Box::new(d)), Endpoint::Listen(l))),
                            )
                        },
                    )
                }
                _ => open_duplex(sc.transport, &opts, id).map(|p| (p, None)),
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
        let start = StartLine::new(2 * streams + 1);
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
                    sc.cpus.map(|c| c.1),
                ),
                (
                    Role::Sender,
                    sender,
                    send_ep,
                    send_link,
                    sc.cpus.map(|c| c.0),
                ),
            ] {
                let side = Side {
                    conn,
                    endpoint,
                    link,
                    start: start.for_side(),
                };
                let workload = Arc::clone(&workload);
                let tx = tx.clone();
                let name = format!(
                    "sb-{}-{i}",
                    if role == Role::Sender { "send" } else { "recv" }
                );
                let line = side.start.clone();
                let spawned = std::thread::Builder::new().name(name).spawn(move || {
                    let r = match (cpu.map(pin).transpose(), role) {
                        (Err(e), _) => Err(e),
                        (Ok(_), Role::Sender) => workload.sender(side),
                        (Ok(_), Role::Receiver) if crate::testhooks::fault("receiver-dies") => {
                            // Gone without a word: the sender must find out by itself.
                            side.start.wait();
                            drop(side);
                            Ok(SideReport::default())
                        }
                        (Ok(_), Role::Receiver) => workload.receiver(side),
                    };
                    // A side that failed before the start must not keep the others waiting.
                    line.stand_in();
                    let _ = tx.send((role, r));
                });
                match spawned {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        // The sides already started are waiting at the start: let them go;
                        // they end at once, their peers' ends closing with this scope.
                        start.open();
                        return Err(RunError::Failed(anyhow!(e).context(
                            "cannot start a thread: the system is out of threads or memory (see `ulimit -u`)",
                        )));
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
            Stop::Duration(d) => Some(d + STALL_GRACE),
            _ => None,
        };
        let (mut senders, mut receivers) = (Vec::new(), Vec::new());
        let mut interrupted_at: Option<Instant> = None;
        let mut failure: Option<(Instant, anyhow::Error)> = None;
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
                    if failure.is_none() {
                        failure = Some((
                            Instant::now(),
                            explain_fd_limit(
                                anyhow!(e).context(format!("{} {side} failed", sc.transport)),
                            ),
                        ));
                    }
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
            if let Some((at, _)) = &failure {
                if at.elapsed() > Duration::from_secs(1) {
                    break;
                }
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
        if let Some((_, e)) = failure {
            // A side that gave up because of Ctrl-C (a send cut short, a dial abandoned)
            // is the interruption, not a failure.
            if interrupt::requested() {
                return Err(RunError::Interrupted);
            }
            return Err(RunError::Failed(e));
        }
        for h in handles {
            let _ = h.join();
        }
        if senders.iter().any(|s| s.interrupted) {
            return Err(RunError::Interrupted);
        }
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
        Ok(Raw {
            senders,
            receivers,
            system: t0.zip(t1).and_then(|(a, b)| SystemCpu::between(&a, &b)),
            link,
            udp_drops,
            connect_time,
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

/// Pin the calling thread to `cpu`.
fn pin(cpu: usize) -> std::io::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| std::io::Error::other(format!("cannot pin a thread to CPU {cpu}: {e}")))
}

/// One side's figures; its interval runs from the shared `start` (the earliest start of
/// any side, so a side that woke late cannot shorten its own interval) to its last end.
fn side_figures(sides: &[SideReport], bytes: u64, start: Option<Instant>) -> SideFigures {
    let secs = sides
        .iter()
        .filter_map(|s| Some(s.ended?.saturating_duration_since(start?).as_secs_f64()))
        .fold(0.0, f64::max);
    let cpu = sides
        .iter()
        .fold(crate::measure::cpu::ThreadCpu::default(), |a, s| {
            a.plus(&s.cpu)
        });
    // A thread cannot use more than one core: on an interval of a few microseconds the
    // clock reads themselves could make it look so.
    let total = cpu
        .total()
        .as_secs_f64()
        .min(secs * sides.len().max(1) as f64);
    let messages: u64 = sides.iter().map(|s| s.messages).sum();
    SideFigures {
        messages_per_second: if secs > 0.0 {
            messages as f64 / secs
        } else {
            0.0
        },
        duration_seconds: secs,
        cpu_seconds: total,
        cpu_user_seconds: cpu.user.as_secs_f64().min(total),
        cpu_system_seconds: cpu.system.as_secs_f64().min(total),
        cpu_utilization: if secs > 0.0 { total / secs } else { 0.0 },
        cpu_seconds_per_gb: (bytes > 0).then(|| total / (bytes as f64 / 1e9)),
        voluntary_context_switches: cpu.voluntary_switches,
        involuntary_context_switches: cpu.involuntary_switches,
    }
}

fn run_figures(sc: &Scenario, raw: &Raw) -> RunFigures {
    let sum = |v: &[SideReport], f: fn(&SideReport) -> u64| v.iter().map(f).sum::<u64>();
    let bytes_sent = sum(&raw.senders, |s| s.bytes);
    let bytes_received = sum(&raw.receivers, |s| s.bytes);
    let messages_sent = sum(&raw.senders, |s| s.messages);
    let messages_received = sum(&raw.receivers, |s| s.messages);
    let start = raw
        .senders
        .iter()
        .chain(&raw.receivers)
        .filter_map(|s| s.started)
        .min();
    let receiver = side_figures(&raw.receivers, bytes_received, start);
    let sender = side_figures(&raw.senders, bytes_sent, start);
    let transfer_seconds = receiver.duration_seconds;
    let timeouts = sum(&raw.senders, |s| s.timeouts);
    let late = sum(&raw.senders, |s| s.late);
    let pingpong = sc.workload == WorkloadKind::Pingpong;
    // pingpong: the client counts the replies that came back in time; the server (the
    // receiver) counts the requests that reached it. Requests lost + replies lost + late
    // replies = requests without an answer = timeouts.
    let requests_reached = messages_received;
    let (bytes_received, messages_received) = if pingpong {
        let answered = messages_sent.saturating_sub(timeouts);
        (answered * sc.size, answered)
    } else {
        (bytes_received, messages_received)
    };
    let sequence = raw
        .receivers
        .iter()
        .map(|r| r.sequence)
        .collect::<Option<Vec<_>>>();
    let reordered = sequence
        .as_ref()
        .map(|v| v.iter().map(|c| c.reordered).sum::<u64>());
    let duplicated = sequence
        .as_ref()
        .map(|v| v.iter().map(|c| c.duplicated).sum::<u64>());
    // One-way workloads are timed by what the receiver got; request/response ones by the
    // client, which drives them.
    // A duplicated datagram is not a delivered message: rates count distinct ones.
    let dup = duplicated.unwrap_or(0);
    let delivered_bytes = bytes_received.saturating_sub(dup * sc.size);
    let (secs, counted) = match sc.workload {
        WorkloadKind::Stream | WorkloadKind::Rate => {
            (receiver.duration_seconds, messages_received - dup)
        }
        _ => (
            sender.duration_seconds,
            messages_sent.saturating_sub(timeouts),
        ),
    };
    let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let latencies = run_histograms(raw)
        .iter()
        .filter_map(|(name, h)| Some((name.to_string(), Latency::of(h)?)))
        .collect();
    RunFigures {
        duration_seconds: secs,
        bytes_sent,
        bytes_received,
        messages_sent,
        messages_received,
        messages_lost: (!sc.transport.reliable()).then(|| match sc.workload {
            WorkloadKind::Pingpong => timeouts,
            // Duplicates do not make up for lost messages.
            _ => messages_sent.saturating_sub(messages_received - duplicated.unwrap_or(0)),
        }),
        requests_lost: pingpong.then(|| messages_sent.saturating_sub(requests_reached)),
        replies_lost: pingpong.then(|| {
            requests_reached
                .saturating_sub(messages_received)
                .saturating_sub(late)
        }),
        replies_late: pingpong.then_some(late),
        messages_reordered: reordered,
        messages_duplicated: duplicated,
        udp_receive_buffer_errors: raw.udp_drops,
        bits_per_second: rate(delivered_bytes) * 8.0,
        bytes_per_second: rate(delivered_bytes),
        messages_per_second: rate(counted),
        sender,
        receiver,
        // /proc/stat counts in ticks (10 ms): over a shorter run its figure is noise.
        system: raw
            .system
            .filter(|_| transfer_seconds >= MIN_SYSTEM_SECONDS),
        sndbuf_bytes: raw.link.sndbuf_bytes,
        rcvbuf_bytes: raw.link.rcvbuf_bytes,
        mss_bytes: raw.link.mss_bytes,
        endpoint: raw.link.endpoint.clone(),
        phases: (sc.workload == WorkloadKind::Stream).then(|| Phases {
            connect_seconds: raw.connect_time.as_secs_f64(),
            transfer_seconds,
            close_seconds: raw
                .senders
                .iter()
                .filter_map(|s| s.close)
                .max()
                .unwrap_or_default()
                .as_secs_f64(),
        }),
        latencies,
    }
}

/// A run's latency histograms, merged over its sides and streams, by name.
fn run_histograms(raw: &Raw) -> BTreeMap<&'static str, Histogram<u64>> {
    let mut out: BTreeMap<&'static str, Histogram<u64>> = BTreeMap::new();
    for (name, h) in raw
        .senders
        .iter()
        .chain(&raw.receivers)
        .flat_map(|s| &s.latencies)
    {
        match out.get_mut(name) {
            Some(into) => merge(into, h),
            None => {
                out.insert(name, h.clone());
            }
        }
    }
    out
}

/// Turn the raw runs of a scenario into its result, with statistics and warnings.
fn figures(sc: &Scenario, raws: &[Raw]) -> ScenarioResult {
    let runs: Vec<RunFigures> = raws.iter().map(|r| run_figures(sc, r)).collect();
    let col = |f: fn(&RunFigures) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    let bits = col(|r| r.bits_per_second);
    let msgs = col(|r| r.messages_per_second);
    let opt_median =
        |f: fn(&RunFigures) -> Option<f64>| median(&runs.iter().filter_map(f).collect::<Vec<_>>());
    let statistics = Summary::of(&bits)
        .zip(Summary::of(&msgs))
        .map(|(b, m)| Statistics {
            bits_per_second: b,
            messages_per_second: m,
        });
    // With no finished run nothing is known: null, never a reassuring zero.
    let lost = total_opt(&runs, |r| r.messages_lost);
    let mut histograms: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    for (name, h) in raws.iter().flat_map(run_histograms) {
        match histograms.get_mut(name) {
            Some(into) => merge(into, &h),
            None => {
                histograms.insert(name.to_string(), h);
            }
        }
    }
    let latencies = histograms
        .iter()
        .filter_map(|(name, h)| Some((name.clone(), Latency::of(h)?)))
        .collect();
    let cpu_seconds_per_round_trip = (sc.workload == WorkloadKind::Pingpong)
        .then(|| {
            opt_median(|r| {
                let trips = r.messages_per_second * r.duration_seconds;
                (trips > 0.0).then(|| (r.sender.cpu_seconds + r.receiver.cpu_seconds) / trips)
            })
        })
        .flatten();
    let mut result = ScenarioResult {
        workload: sc.workload,
        transport: sc.transport,
        engine: sc.engine,
        size_bytes: sc.size,
        options: ScenarioOptions {
            duration_seconds: match sc.stop {
                Stop::Duration(d) => Some(d.as_secs_f64()),
                _ => None,
            },
            count: match sc.stop {
                Stop::Count(n) => Some(n),
                _ => None,
            },
            bytes: match sc.stop {
                Stop::Bytes(n) => Some(n),
                _ => None,
            },
            warmup_seconds: sc.warmup.as_secs_f64(),
            runs: sc.runs,
            parallel: sc.parallel,
            sndbuf_bytes: sc.sndbuf,
            rcvbuf_bytes: sc.rcvbuf,
            nodelay: sc.nodelay,
            cpus: sc.cpus.map(|(a, b)| [a, b]),
            runtime: (sc.engine == crate::engine::EngineKind::Async).then_some(sc.extras.runtime),
        },
        bits_per_second: median(&bits),
        bytes_per_second: median(&col(|r| r.bytes_per_second)),
        messages_per_second: median(&msgs),
        bytes_sent: runs.iter().map(|r| r.bytes_sent).sum(),
        bytes_received: runs.iter().map(|r| r.bytes_received).sum(),
        messages_sent: runs.iter().map(|r| r.messages_sent).sum(),
        messages_received: runs.iter().map(|r| r.messages_received).sum(),
        messages_lost: lost,
        requests_lost: total_opt(&runs, |r| r.requests_lost),
        replies_lost: total_opt(&runs, |r| r.replies_lost),
        replies_late: total_opt(&runs, |r| r.replies_late),
        messages_reordered: total_opt(&runs, |r| r.messages_reordered),
        messages_duplicated: total_opt(&runs, |r| r.messages_duplicated),
        // Nothing sent: nothing was delivered or lost, so the fraction is unknown.
        delivered_fraction: lost.and_then(|l| {
            let sent: u64 = runs.iter().map(|r| r.messages_sent).sum();
            (sent > 0).then(|| (sent - l.min(sent)) as f64 / sent as f64)
        }),
        udp_receive_buffer_errors: total_opt(&runs, |r| r.udp_receive_buffer_errors),
        sender_cpu_seconds_per_gb: opt_median(|r| r.sender.cpu_seconds_per_gb),
        receiver_cpu_seconds_per_gb: opt_median(|r| r.receiver.cpu_seconds_per_gb),
        latencies,
        cpu_seconds_per_round_trip,
        statistics,
        runs,
        warnings: Vec::new(),
        error: None,
        histograms,
    };
    result.warnings = warnings(sc, &result);
    result
}

/// Round trips this slow on loopback TCP are Nagle's algorithm holding a request's tail
/// until the peer's delayed ACK (40 ms on Linux) lets it go.
const STALL_NS: u64 = 30_000_000;

/// Explain a cluster of ~40 ms round trips on TCP without TCP_NODELAY.
fn delayed_ack_stall(sc: &Scenario, r: &ScenarioResult) -> Option<Warning> {
    let tcp = matches!(sc.transport, TransportKind::Tcp | TransportKind::Tcp6);
    let h = r.histograms.get("round_trip")?;
    let slow = fraction_at_least(h, STALL_NS);
    // Only a request that leaves in pieces can wait for an ACK (several writes, or one
    // larger than a segment); in open loop, queueing alone makes round trips this slow.
    let mss = r.median_run().and_then(|m| m.mss_bytes).unwrap_or(65_483);
    let pieces = sc.extras.writes > 1 || sc.size > mss;
    (tcp && !sc.nodelay && pieces && sc.extras.rate.is_none() && slow >= 0.01).then(|| Warning {
        kind: "delayed-ack".into(),
        message: format!(
            "{:.0}% of round trips took 30 ms or more, the signature of Nagle's algorithm waiting for a delayed \
             ACK (about 40 ms on Linux) when a request is sent in more than one write: use --nodelay \
             (TCP_NODELAY), or send each request in one write",
            slow * 100.0
        ),
    })
}

/// The total of a per-run counter, null if any run lacks it or there is no run.
fn total_opt(runs: &[RunFigures], f: fn(&RunFigures) -> Option<u64>) -> Option<u64> {
    if runs.is_empty() {
        return None;
    }
    runs.iter().map(f).sum()
}

/// Reliable transports must deliver exactly what was sent.
fn check_agreement(sc: &Scenario, r: &ScenarioResult) -> Option<String> {
    if !sc.transport.reliable() {
        return None;
    }
    if let Some(f) = r
        .runs
        .iter()
        .find(|f| f.requests_lost.unwrap_or(0) + f.replies_lost.unwrap_or(0) > 0)
    {
        return Some(format!(
            "{} of {} requests or their replies went missing on {}, which must deliver everything: this is \
             a bug, please report it",
            f.requests_lost.unwrap_or(0) + f.replies_lost.unwrap_or(0),
            f.messages_sent,
            sc.transport
        ));
    }
    let bad = r
        .runs
        .iter()
        .find(|f| f.bytes_sent != f.bytes_received || f.messages_sent != f.messages_received)?;
    Some(format!(
        "sender and receiver disagree: sent {} bytes in {} messages, received {} bytes in {} messages; \
         a reliable transport must deliver everything, so this is a bug: please report it",
        bad.bytes_sent, bad.messages_sent, bad.bytes_received, bad.messages_received
    ))
}

fn warnings(sc: &Scenario, r: &ScenarioResult) -> Vec<Warning> {
    let mut out = Vec::new();
    if let Some(cv) = r.statistics.as_ref().and_then(|s| s.bits_per_second.cv) {
        if cv > UNSTABLE_CV {
            out.push(Warning {
                kind: "unstable".into(),
                message: format!(
                    "runs disagree: throughput varies by {:.1}% (coefficient of variation); close other programs, \
                     pin threads with --cpus, or raise --runs and --duration",
                    cv * 100.0
                ),
            });
        }
    }
    if let Some(first) = r.median_run() {
        let clamp = |what: &str, asked: Option<u64>, got: Option<u64>, sysctl: &str| {
            let (asked, got) = (asked?, got?);
            // Linux doubles SO_SNDBUF/SO_RCVBUF for bookkeeping; less than double means clamped.
            (sc.transport.is_socket() && got < asked.saturating_mul(2)).then(|| Warning {
                kind: "buffer-clamped".into(),
                message: format!(
                    "{what} of {} was requested but the kernel granted {} (half of it usable): it is capped by {sysctl}; \
                     raise it with `sysctl -w {sysctl}=...`",
                    format_bytes(asked),
                    format_bytes(got)
                ),
            })
        };
        out.extend(clamp(
            "--sndbuf",
            sc.sndbuf,
            first.sndbuf_bytes,
            "net.core.wmem_max",
        ));
        out.extend(clamp(
            "--rcvbuf",
            sc.rcvbuf,
            first.rcvbuf_bytes,
            "net.core.rmem_max",
        ));
        let busy: Vec<String> = [("sender", &first.sender), ("receiver", &first.receiver)]
            .into_iter()
            .map(|(name, side)| (name, side.cpu_utilization / sc.parallel as f64))
            .filter(|&(_, used)| used >= SATURATED)
            .map(|(name, used)| format!("the {name} {:.0}%", used * 100.0))
            .collect();
        // Only one-way workloads are meant to keep a core busy; request/response sides wait.
        // A paced sender spins on purpose.
        let one_way = matches!(sc.workload, WorkloadKind::Stream | WorkloadKind::Rate)
            && sc.extras.rate.is_none();
        // Over a few milliseconds, thread start-up and the first wake-ups dominate: too
        // short to call the run CPU-bound.
        let judged = first.duration_seconds >= MIN_JUDGED_SECONDS;
        if one_way && judged && !busy.is_empty() {
            out.push(Warning {
                kind: "cpu-saturated".into(),
                message: format!(
                    "CPU-bound ({} of a core): the figure is a limit of the CPU and the kernel's code path, \
                     not of the transport",
                    busy.join(", ")
                ),
            });
        }
    }
    if let Some(w) = delayed_ack_stall(sc, r) {
        out.push(w);
    }
    if let Some(lost) = r.messages_lost.filter(|&l| l > 0) {
        let why = match r.udp_receive_buffer_errors {
            Some(0) => "the kernel counted no receive-buffer overflow, so they were dropped elsewhere \
                        (sender queue, interface, a firewall rule, or another host)"
                .to_string(),
            // Most of the losses (the counter is system-wide, so it may exceed them): the
            // receiver's buffer overflowed.
            Some(n) if n.saturating_mul(10) >= lost.saturating_mul(9) => format!(
                "the kernel counted {n} receive-buffer overflows (UDP RcvbufErrors) during the run: the \
                 receiver's buffer was full; try a larger --rcvbuf (up to net.core.rmem_max) or a --rate"
            ),
            Some(n) => format!(
                "only {n} of them were receive-buffer overflows (UDP RcvbufErrors); the other {} were dropped \
                 elsewhere (sender queue, interface, a firewall rule, or another host): look there first, \
                 e.g. `nstat -az | grep -i drop`",
                lost - n
            ),
            None => "try a larger --rcvbuf, or pace the sender with --rate".to_string(),
        };
        out.push(Warning {
            kind: "datagram-loss".into(),
            message: format!("{lost} of {} datagrams were lost: {why}", r.messages_sent),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_that_starts_late_is_timed_from_the_shared_start() {
        let t0 = Instant::now();
        let late = SideReport {
            bytes: 1000,
            started: Some(t0 + Duration::from_millis(3)),
            ended: Some(t0 + Duration::from_millis(10)),
            ..SideReport::default()
        };
        let f = side_figures(&[late], 1000, Some(t0));
        assert!(
            (f.duration_seconds - 0.010).abs() < 1e-9,
            "{}",
            f.duration_seconds
        );
    }

    fn scenario(argv: &[&str]) -> Scenario {
        let mut v = vec!["sockbench"];
        v.extend_from_slice(argv);
        Plan::from_args(&<crate::cli::Args as clap::Parser>::parse_from(v))
            .unwrap()
            .scenarios
            .remove(0)
    }

    fn udp_raw(sent: u64, received: u64, drops: Option<u64>) -> Raw {
        let t0 = Instant::now();
        let side = |n: u64| SideReport {
            bytes: n * 64,
            messages: n,
            started: Some(t0),
            ended: Some(t0 + Duration::from_millis(100)),
            ..SideReport::default()
        };
        Raw {
            senders: vec![side(sent)],
            receivers: vec![side(received)],
            system: None,
            link: LinkInfo::default(),
            udp_drops: drops,
            connect_time: Duration::ZERO,
        }
    }

    #[test]
    fn the_loss_warning_blames_the_receive_buffer_only_for_the_losses_it_explains() {
        let sc = scenario(&["rate", "-t", "udp", "-s", "64"]);
        let w = |drops| {
            let r = figures(&sc, &[udp_raw(1000, 900, drops)]);
            assert_eq!(r.messages_lost, Some(100));
            r.warnings
                .iter()
                .find(|w| w.kind == "datagram-loss")
                .unwrap()
                .message
                .clone()
        };
        let few = w(Some(3));
        assert!(
            few.contains("only 3 of them") && few.contains("other 97"),
            "{few}"
        );
        assert!(!few.contains("try a larger --rcvbuf"), "{few}");
        assert!(w(Some(95)).contains("the receiver's buffer was full"));
        assert!(w(Some(0)).contains("no receive-buffer overflow"));
    }

    #[test]
    fn no_finished_run_means_unknown_counts_not_zero() {
        let sc = scenario(&["rate", "-t", "udp", "-s", "64"]);
        let r = figures(&sc, &[]);
        assert_eq!(r.messages_lost, None);
        assert_eq!(r.delivered_fraction, None);
        assert_eq!(r.messages_reordered, None);
        assert_eq!(r.udp_receive_buffer_errors, None);
        let r = figures(&sc, &[udp_raw(0, 0, Some(0))]);
        assert_eq!(r.delivered_fraction, None, "nothing sent: unknown");
        let r = figures(&sc, &[udp_raw(10, 10, Some(0))]);
        assert_eq!(r.delivered_fraction, Some(1.0));
        assert_eq!(r.messages_lost, Some(0));
        assert_eq!(r.udp_receive_buffer_errors, Some(0));
    }

    #[test]
    fn a_side_is_never_above_one_core_per_thread() {
        let t0 = Instant::now();
        let side = SideReport {
            started: Some(t0),
            ended: Some(t0 + Duration::from_micros(10)),
            cpu: crate::measure::cpu::ThreadCpu {
                exact: Duration::from_micros(15),
                user: Duration::from_micros(15),
                ..Default::default()
            },
            ..SideReport::default()
        };
        let f = side_figures(std::slice::from_ref(&side), 64, Some(t0));
        assert!(
            (f.cpu_utilization - 1.0).abs() < 1e-9,
            "{}",
            f.cpu_utilization
        );
        assert!(f.cpu_seconds <= f.duration_seconds);
        assert!(f.cpu_user_seconds <= f.cpu_seconds);
        // Two threads: up to two cores, not one.
        let two = side_figures(&[side.clone(), side], 64, Some(t0));
        assert!(
            (two.cpu_utilization - 2.0).abs() < 1e-9,
            "{}",
            two.cpu_utilization
        );
    }

    #[test]
    fn only_a_busy_side_over_a_long_enough_run_is_called_cpu_bound() {
        let sc = scenario(&["stream", "-t", "tcp", "-s", "64"]);
        let run = |ms: u64, busy_ms: u64| {
            let mut raw = udp_raw(10, 10, None);
            for s in raw.senders.iter_mut().chain(raw.receivers.iter_mut()) {
                s.ended = s.started.map(|t| t + Duration::from_millis(ms));
            }
            raw.senders[0].cpu.exact = Duration::from_millis(busy_ms);
            figures(&sc, &[raw])
                .warnings
                .iter()
                .any(|w| w.kind == "cpu-saturated")
        };
        assert!(run(200, 199), "a sender busy the whole 0.2 s");
        assert!(!run(200, 20), "a sender busy 10% of the time");
        assert!(!run(5, 5), "5 ms is too short to judge");
    }

    #[test]
    fn a_reliable_transport_that_loses_anything_fails_the_scenario() {
        // stream: the receiver got less than was sent.
        let sc = scenario(&["stream", "-t", "tcp", "-s", "64"]);
        let r = figures(&sc, &[udp_raw(10, 9, None)]);
        let e = check_agreement(&sc, &r).expect("a disagreement is an error");
        assert!(e.contains("sender and receiver disagree"), "{e}");
        assert_eq!(
            check_agreement(&sc, &figures(&sc, &[udp_raw(10, 10, None)])),
            None
        );
        // pingpong: the server saw fewer requests than the client sent, though every
        // reply the client waited for came (the counts cannot both be right).
        let sc = scenario(&["pingpong", "-t", "tcp", "-s", "64"]);
        let r = figures(&sc, &[udp_raw(10, 9, None)]);
        assert_eq!(r.runs[0].requests_lost, Some(1));
        let e = check_agreement(&sc, &r).expect("a lost request on TCP is an error");
        assert!(e.contains("1 of 10 requests"), "{e}");
        assert_eq!(
            check_agreement(&sc, &figures(&sc, &[udp_raw(10, 10, None)])),
            None
        );
    }

    #[test]
    fn the_median_run_describes_the_table() {
        let sc = Plan::from_args(&<crate::cli::Args as clap::Parser>::parse_from([
            "sockbench",
            "stream",
        ]))
        .unwrap()
        .scenarios
        .remove(0);
        let t0 = Instant::now();
        let raw = |ms: u64| Raw {
            senders: vec![SideReport {
                bytes: 1000,
                messages: 1,
                started: Some(t0),
                ended: Some(t0 + Duration::from_millis(ms)),
                ..SideReport::default()
            }],
            receivers: vec![SideReport {
                bytes: 1000,
                messages: 1,
                started: Some(t0),
                ended: Some(t0 + Duration::from_millis(ms)),
                ..SideReport::default()
            }],
            system: None,
            link: LinkInfo::default(),
            udp_drops: None,
            connect_time: Duration::ZERO,
        };
        let r = figures(&sc, &[raw(10), raw(40), raw(20)]);
        let median = r.median_run().unwrap();
        assert!((median.duration_seconds - 0.020).abs() < 1e-9);
        assert_eq!(r.bits_per_second, Some(median.bits_per_second));
        assert_eq!(r.bytes_sent, 3000);
    }
}

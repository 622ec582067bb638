//! From flags to a checked plan: every value parsed, every combination checked, before
//! any socket is opened. Problems are [`PlanError`]s (exit code 2).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{
    Args, ByPlacementArg, Command, CommonArgs, CpuList, DurationArg, SuiteArgs, TransportsArg,
    WarmupArg,
};
use crate::engine::EngineKind;
use crate::error::PlanError;
use crate::report::export::ExportKind;
use crate::scenario::{
    Layout, Scenario, Skipped, Stop, WorkloadKind, WorkloadOptions, MAX_BATCH, MAX_BUFFER,
    MAX_SIZE, SUITE_SIZES,
};
use crate::transport::run_dir::{LONGEST_FILE_NAME, RUN_DIR_OVERHEAD};
use crate::transport::{default_dir_base, Framing, TransportKind, UNIX_PATH_MAX};
use crate::vocab::units::{format_bytes, parse_duration, parse_size, parse_size_list};
use crate::vocab::Format;
use crate::workload::spec;

pub mod host;
pub mod matrix;
#[cfg(test)]
mod stream_tests;

pub use host::Host;

/// Most parallel streams (each is two threads).
pub const MAX_PARALLEL: u32 = 256;

fn parse_opt_rate(text: &Option<String>) -> Result<Option<f64>, PlanError> {
    text.as_deref()
        .map(|t| crate::vocab::units::parse_rate(t).map_err(|e| invalid(format!("--rate: {e}"))))
        .transpose()
}

/// Where output goes.
#[derive(Clone, Debug)]
pub struct Output {
    /// stdout format.
    pub format: Format,
    /// Exports (`--export-*`, `--histogram`), resolved and checked.
    pub exports: Vec<crate::report::export::Export>,
    /// No progress bar.
    pub quiet: bool,
    /// How tables present figures.
    pub view: crate::vocab::View,
}

/// Everything the runner needs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Scenarios in order.
    pub scenarios: Vec<Scenario>,
    /// Combinations that cannot run, left out of a multi-transport plan.
    pub skipped: Vec<Skipped>,
    /// Output settings.
    pub output: Output,
    /// Table layout.
    pub layout: Layout,
    /// `--path`: where socket files and FIFOs go (None: a private temporary directory).
    pub path: Option<PathBuf>,
    /// Things the plan left out that the report should mention (e.g. an engine the
    /// system refuses).
    pub notes: Vec<String>,
    /// Where the other role runs.
    pub placement: Where,
    /// `--interval`: print and keep what each interval of a measured run carried.
    pub interval: Option<Duration>,
}

/// Where the other role of each stream runs.
#[derive(Clone, Debug, Default)]
pub enum Where {
    /// Threads of this process.
    #[default]
    Threads,
    /// A child process started for each run; `reverse`: the child sends.
    Processes {
        /// The child sends.
        reverse: bool,
        /// Both directions at once.
        bidir: bool,
    },
    /// A `sockbench server`.
    Server {
        /// HOST[:PORT] as given.
        target: String,
        /// The pre-shared key.
        key: Option<crate::control::auth::Key>,
        /// The server sends.
        reverse: bool,
        /// Both directions at once.
        bidir: bool,
    },
}

/// Where `a` puts the other role.
fn placement_of(a: &CommonArgs) -> Result<Where, PlanError> {
    use crate::cli::PlacementKind;
    match (&a.server, a.placement.placement) {
        (Some(target), _) => {
            if a.bind.is_some() || a.connect.is_some() {
                return Err(invalid(
                    "--bind/--connect do not apply with --server: the server listens where the client reached it",
                ));
            }
            if target.trim().is_empty() {
                return Err(invalid(
                    "--server needs a host: HOST, HOST:PORT or [IPV6]:PORT",
                ));
            }
            let key = a
                .key_file
                .as_deref()
                .map(crate::control::auth::Key::load)
                .transpose()
                .map_err(|e| invalid(format!("--key-file: {e:#}")))?;
            Ok(Where::Server {
                target: target.trim().to_string(),
                key,
                reverse: a.reverse,
                bidir: a.bidir,
            })
        }
        (None, PlacementKind::Processes) => Ok(Where::Processes {
            reverse: a.reverse,
            bidir: a.bidir,
        }),
        (None, PlacementKind::Threads) if a.reverse || a.bidir => Err(invalid(format!(
            "{} needs another side: --server HOST or --placement processes",
            if a.reverse { "--reverse" } else { "--bidir" }
        ))),
        (None, PlacementKind::Threads) => Ok(Where::Threads),
    }
}

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

/// Parse a transport list; `all` is every transport in `usable` (those the workload can
/// use). Returns whether `all` was used.
pub fn parse_transports(
    text: &str,
    usable: &[TransportKind],
) -> Result<(Vec<TransportKind>, bool), PlanError> {
    use clap::ValueEnum;
    if text.trim() == "all" {
        return Ok((usable.to_vec(), true));
    }
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let t = TransportKind::from_str(name, true).map_err(|_| {
            let names: Vec<_> = TransportKind::ALL.iter().map(|t| t.name()).collect();
            invalid(format!(
                "unknown transport '{name}': choose from {}, or all",
                names.join(", ")
            ))
        })?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    if out.is_empty() {
        return Err(invalid(
            "no transport given: e.g. --transport unix,tcp or --transport all",
        ));
    }
    Ok((out, false))
}

/// Parse an engine list; `all` is every engine.
pub fn parse_engines(text: &str) -> Result<Vec<EngineKind>, PlanError> {
    use clap::ValueEnum;
    if text.trim() == "all" {
        return Ok(EngineKind::ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let e = EngineKind::from_str(name, true).map_err(|_| {
            let names: Vec<_> = EngineKind::ALL.iter().map(|e| e.name()).collect();
            invalid(format!(
                "unknown engine '{name}': choose from {}, or all",
                names.join(", ")
            ))
        })?;
        if !out.contains(&e) {
            out.push(e);
        }
    }
    if out.is_empty() {
        return Err(invalid("no engine given: e.g. --engine blocking"));
    }
    Ok(out)
}

/// Refuse a plan whose buffers would not fit in memory or in this process's limits: each
/// stream's two sides hold up to three message buffers between them (a request, a
/// response and the echo), plus a shared-memory ring of up to `--sndbuf`.
fn check_memory(
    host: &Host,
    size: u64,
    parallel: u32,
    sndbuf: Option<u64>,
) -> Result<(), PlanError> {
    let need = (3 * size + sndbuf.unwrap_or(0)).saturating_mul(parallel as u64);
    let what = || {
        format!(
            "{} messages x {parallel} streams need about {}",
            format_bytes(size),
            format_bytes(need)
        )
    };
    if let Some(available) = host.mem_available {
        if need > available / 2 {
            return Err(invalid(format!(
                "{} of memory, more than half of the {} available: use a smaller --size or fewer --parallel streams",
                what(),
                format_bytes(available)
            )));
        }
    }
    // An address-space or data limit (ulimit -v / -d) would turn the allocation into an
    // abort: compare with what the process already uses, the side threads' stacks and a
    // margin for the runtime.
    let stacks = 2 * parallel as u64 * (8 << 20);
    for &(name, soft, used) in &host.memory_limits {
        let wanted = need + used + stacks + (64 << 20);
        if wanted > soft {
            return Err(invalid(format!(
                "{}, but this process's {name} is limited to {} and {} of it is in use: use a smaller --size \
                 or fewer --parallel streams, or raise the limit",
                what(),
                format_bytes(soft),
                format_bytes(used)
            )));
        }
    }
    Ok(())
}

fn parse_opt_size(name: &str, text: &Option<String>) -> Result<Option<u64>, PlanError> {
    text.as_deref()
        .map(|t| {
            let n = parse_size(t).map_err(|e| invalid(format!("--{name}: {e}")))?;
            if n == 0 {
                return Err(invalid(format!("--{name} must be at least 1 byte")));
            }
            Ok(n)
        })
        .transpose()
}

/// A buffer axis (`--sndbuf 4K`, `--rcvbuf 1,4K..4M`): each value a scenario; `[None]`
/// (the kernel's default) when not given.
fn parse_buffer_list(name: &str, text: &Option<String>) -> Result<Vec<Option<u64>>, PlanError> {
    let Some(t) = text.as_deref() else {
        return Ok(vec![None]);
    };
    let list = parse_size_list(t).map_err(|e| invalid(format!("--{name}: {e}")))?;
    for &n in &list {
        if n == 0 {
            return Err(invalid(format!("--{name} must be at least 1 byte")));
        }
        if n > MAX_BUFFER {
            return Err(invalid(format!(
                "--{name} is at most {} (the kernel takes buffer sizes as a signed 32-bit count, doubled)",
                format_bytes(MAX_BUFFER)
            )));
        }
    }
    Ok(list.into_iter().map(Some).collect())
}

fn parse_bind(text: &str) -> Result<SocketAddr, PlanError> {
    let t = text.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let ip = t.trim_start_matches('[').trim_end_matches(']');
    ip.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 0))
        .map_err(|_| {
            invalid(format!(
                "invalid --bind '{text}': use an IP or IP:PORT, e.g. 127.0.0.1:5201 or [::1]:5201"
            ))
        })
}

/// `--cpus` of the measuring commands: the sender's CPU, then the receiver's (one: both
/// there), each one this process may run on.
fn parse_cpus(host: &Host, list: &CpuList) -> Result<(usize, usize), PlanError> {
    list.within(&host.cpus).map_err(invalid)?;
    match list.0[..] {
        [a, b] => Ok((a, b)),
        [a] => Ok((a, a)),
        _ => Err(invalid(format!(
            "--cpus: give the sender's CPU and the receiver's, e.g. --cpus {} ({} given)",
            host.cpus
                .iter()
                .take(2)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
            list.0.len()
        ))),
    }
}

/// Both sides run on this host, so data to any of its own addresses goes through the
/// loopback device: say so when the user named a non-loopback address, which reads as if
/// the data took that interface's link.
fn own_address_note(bind: Option<IpAddr>, connect: Option<IpAddr>) -> Option<String> {
    let ip = connect.or(bind).filter(|ip| !ip.is_loopback())?;
    // An address this host holds (or "any"): binding to it works.
    let own = ip.is_unspecified() || std::net::UdpSocket::bind((ip, 0)).is_ok();
    own.then(|| {
        format!(
            "{ip} is an address of this host: both sides run here, so the data goes through the loopback \
             device (lo), not the link of the interface that holds {ip}; to measure a link, put the two \
             sides on two hosts or in two network namespaces"
        )
    })
}

fn check_path(dir: &std::path::Path, explicit: bool) -> Result<(), PlanError> {
    // The run directory adds "/sockbench-XXXXXX" when not explicit.
    let overhead = if explicit {
        1 + LONGEST_FILE_NAME
    } else {
        RUN_DIR_OVERHEAD
    };
    let len = dir.as_os_str().len() + overhead;
    if len > UNIX_PATH_MAX {
        return Err(invalid(format!(
            "Unix socket paths under {} would be up to {len} bytes, over Linux's {UNIX_PATH_MAX}-byte limit (sun_path): \
             use a shorter --path, e.g. --path /tmp",
            dir.display()
        )));
    }
    if explicit && !dir.is_dir() {
        return Err(invalid(format!(
            "--path {}: no such directory (create it first)",
            dir.display()
        )));
    }
    if let Err(e) = nix::unistd::access(
        dir,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    ) {
        return Err(invalid(if explicit {
            format!(
                "--path {}: cannot create files there ({}): pick a directory you may write",
                dir.display(),
                e.desc()
            )
        } else {
            format!(
                "cannot create socket files in {} ({}), where $XDG_RUNTIME_DIR or $TMPDIR lead: give a directory \
                 you may write with --path",
                dir.display(),
                e.desc()
            )
        }));
    }
    Ok(())
}

impl Plan {
    /// The plan of a command that hands the runner its cases itself, one run at a time
    /// (relay's chains of three roles, a swarm's fan of pairs): `scenarios` names what it
    /// runs up front (a swarm's one scenario, or none), and the runner takes the rest from
    /// here: the output, where the roles run, and `--interval`. Nothing is skipped, the
    /// table is a list, and socket files go to a private directory.
    pub fn of_cases(
        scenarios: Vec<Scenario>,
        out: &crate::cli::OutputArgs,
        placement: Where,
        interval: Option<Duration>,
    ) -> Plan {
        Plan {
            scenarios,
            skipped: Vec::new(),
            output: Output {
                format: out.format,
                exports: Vec::new(),
                quiet: out.quiet,
                view: out.view(),
            },
            layout: Layout::List,
            path: None,
            notes: Vec::new(),
            placement,
            interval,
        }
    }

    /// Check the flags and build the plan.
    ///
    /// # Errors
    /// [`PlanError`] for anything malformed, out of range or unsupported.
    pub fn from_args(args: &Args) -> Result<Plan, PlanError> {
        let host = Host::probe();
        crate::testhooks::hold("plan");
        Plan::from_args_on(args, &host)
    }

    /// Check the flags and build the plan for a machine whose limits are `host`.
    ///
    /// # Errors
    /// As [`Plan::from_args`].
    pub fn from_args_on(args: &Args, host: &Host) -> Result<Plan, PlanError> {
        let out = args.output();
        let mut wanted: Vec<_> = (out.report_exports().into_iter())
            .map(|(f, p)| (ExportKind::Report(f), p))
            .collect();
        if let Some(Command::Pingpong(p)) = &args.command {
            if let Some(h) = &p.histogram {
                wanted.push((ExportKind::Histogram, h.clone()));
            }
        }
        let exports = crate::report::export::prepare(&wanted)?;
        let by_placement = match &args.command {
            Some(Command::Stream(a)) => a.common.by_placement,
            Some(Command::Pingpong(a)) => a.common.by_placement,
            Some(Command::Rate(a)) => a.common.by_placement,
            Some(Command::Connect(a)) => a.common.by_placement,
            Some(Command::Suite(a)) => a.by_placement,
            None => args.by_placement,
            _ => ByPlacementArg::default(),
        };
        let output = Output {
            format: out.format,
            exports,
            quiet: out.quiet,
            view: out.view_by(by_placement),
        };
        match &args.command {
            Some(Command::Stream(s)) => {
                let bytes = parse_opt_size("bytes", &s.bytes)?;
                let extras = WorkloadOptions {
                    bytes,
                    send: s.send,
                    recv: s.recv,
                    batch: s.batch,
                    ..WorkloadOptions::default()
                };
                Plan::workload(host, WorkloadKind::Stream, &s.common, extras, output)
            }
            Some(Command::Pingpong(p)) => {
                let extras = WorkloadOptions {
                    rate: parse_opt_rate(&p.rate)?,
                    writes: p.writes,
                    timestamps: p.timestamps,
                    ..WorkloadOptions::default()
                };
                if p.writes == 0 || p.writes > 64 {
                    return Err(invalid("--writes must be between 1 and 64"));
                }
                Plan::workload(host, WorkloadKind::Pingpong, &p.common, extras, output)
            }
            Some(Command::Rate(r)) => {
                let extras = WorkloadOptions {
                    rate: parse_opt_rate(&r.rate)?,
                    batch: r.batch,
                    timestamps: r.timestamps,
                    ..WorkloadOptions::default()
                };
                Plan::workload(host, WorkloadKind::Rate, &r.common, extras, output)
            }
            Some(Command::Connect(c)) => {
                if c.open == 0 || c.open > 10_000 {
                    return Err(invalid("--open must be between 1 and 10000"));
                }
                // Each open connection holds a descriptor on both sides.
                let need = 2 * c.open as u64 * c.common.parallel as u64 + 64;
                if let Some(soft) = host.max_descriptors {
                    if need > soft {
                        return Err(invalid(format!(
                            "--open {} x {} streams needs about {need} file descriptors, over this process's limit \
                             of {soft}: raise it with `ulimit -n {need}` or open fewer",
                            c.open, c.common.parallel
                        )));
                    }
                }
                let extras = WorkloadOptions {
                    linger0: c.linger0,
                    open: c.open,
                    ..WorkloadOptions::default()
                };
                Plan::workload(host, WorkloadKind::Connect, &c.common, extras, output)
            }
            Some(Command::Suite(s)) => Plan::suite(host, s, output),
            Some(
                Command::Report(_)
                | Command::Compare(_)
                | Command::Server(_)
                | Command::Listen(_)
                | Command::Swarm(_)
                | Command::Mesh(_)
                | Command::Peer(_)
                | Command::Serve(_)
                | Command::Load(_)
                | Command::Models(_)
                | Command::Relay(_),
            ) => Err(invalid(
                "this command measures nothing itself: it has nothing to plan",
            )),
            None => Plan::suite(
                host,
                &SuiteArgs {
                    duration: DurationArg::default(),
                    warmup: WarmupArg::default(),
                    transports: TransportsArg::default(),
                    output: args.output.clone(),
                    by_placement: args.by_placement,
                },
                output,
            ),
        }
    }

    fn suite(host: &Host, args: &SuiteArgs, output: Output) -> Result<Plan, PlanError> {
        let duration = parse_duration(args.duration.duration.as_deref().unwrap_or("1s"))
            .map_err(|e| invalid(format!("--duration: {e}")))?;
        let warmup = parse_duration(args.warmup.warmup.as_deref().unwrap_or("0.1s"))
            .map_err(|e| invalid(format!("--warmup: {e}")))?;
        if duration.is_zero() {
            return Err(invalid("--duration must be more than 0"));
        }
        let (transports, _) = parse_transports(
            args.transports.transport.as_deref().unwrap_or("all"),
            &TransportKind::ALL,
        )?;
        let cell = |workload: WorkloadKind, duration: Duration| Scenario {
            stop: Stop::Duration(duration),
            warmup,
            ..Scenario::new(workload, transports[0], 64)
        };
        let message: Vec<TransportKind> = transports
            .iter()
            .copied()
            .filter(|t| t.framing() == Framing::Message)
            .collect();
        // Throughput of every transport at the four sizes; then the latency of every
        // transport and the message rate of the message transports, each at 64 B and for
        // half the stream cells' time. A suite never stops for a refusal: it skips.
        let mut plan = Plan {
            scenarios: Vec::new(),
            skipped: Vec::new(),
            output,
            layout: Layout::Suite,
            path: None,
            notes: Vec::new(),
            placement: Where::Threads,
            interval: None,
        };
        for (workload, duration, transports, sizes) in [
            (
                WorkloadKind::Stream,
                duration,
                &transports,
                &SUITE_SIZES[..],
            ),
            (WorkloadKind::Pingpong, duration / 2, &transports, &[64][..]),
            (WorkloadKind::Rate, duration / 2, &message, &[64][..]),
        ] {
            // The suite pins nothing: no role is put on its peer's CPU.
            let axes = matrix::Axes {
                transports,
                engines: &[EngineKind::Blocking],
                sizes: Some(sizes),
                sndbufs: &[None],
                rcvbufs: &[None],
                explicit: false,
                one_cpu: None,
            };
            let (run, skipped) = matrix::expand(host, &axes, &cell(workload, duration))?;
            plan.scenarios.extend(run);
            plan.skipped.extend(skipped);
        }
        if transports.iter().any(|t| t.uses_path()) {
            check_path(&default_dir_base(), false)?;
        }
        Ok(plan)
    }

    fn workload(
        host: &Host,
        kind: WorkloadKind,
        a: &CommonArgs,
        extras: WorkloadOptions,
        output: Output,
    ) -> Result<Plan, PlanError> {
        let (transports, all) = parse_transports(
            a.transports.transport.as_deref().unwrap_or("unix"),
            spec(kind).transports(),
        )?;
        let mut engines = parse_engines(&a.engine)?;
        let all_engines = a.engine.trim() == "all";
        // An engine the system refuses (io_uring disabled, a feature not built) stops an
        // explicit request; with `all`, the others still run and the report says why.
        let mut unavailable = Vec::new();
        for e in &engines {
            if let Some(why) = host.engine_unavailable(*e) {
                if !all_engines {
                    return Err(PlanError::Unavailable(format!("engine {e}: {why}")));
                }
                unavailable.push(format!("engine {e} skipped: {why}"));
            }
        }
        engines.retain(|&e| host.engine_unavailable(e).is_none());
        let sizes = match &a.sizes.size {
            Some(text) => Some(parse_size_list(text).map_err(|e| invalid(format!("--size: {e}")))?),
            None => None,
        };
        let given = sizes.clone().unwrap_or_default();
        if let Some(&s) = given.iter().find(|&&s| s == 0) {
            return Err(invalid(format!(
                "--size {s}: a message must be at least 1 byte"
            )));
        }
        if let Some(&s) = given.iter().find(|&&s| s > MAX_SIZE) {
            return Err(invalid(format!(
                "--size {}: the largest message size is {}",
                format_bytes(s),
                format_bytes(MAX_SIZE)
            )));
        }
        let stop = match (&a.duration.duration, a.count, extras.bytes) {
            (_, Some(0), _) => return Err(invalid("--count must be at least 1")),
            (_, Some(n), _) => Stop::Count(n),
            (_, _, Some(b)) => Stop::Bytes(b),
            (Some(d), _, _) => {
                let d = parse_duration(d).map_err(|e| invalid(format!("--duration: {e}")))?;
                if d.is_zero() {
                    return Err(invalid("--duration must be more than 0"));
                }
                Stop::Duration(d)
            }
            (None, None, None) => Stop::Duration(Duration::from_secs(2)),
        };
        let warmup = parse_duration(a.warmup.warmup.as_deref().unwrap_or("0.25s"))
            .map_err(|e| invalid(format!("--warmup: {e}")))?;
        let interval = a.interval.get().map_err(invalid)?;
        if a.parallel == 0 {
            return Err(invalid("--parallel must be at least 1"));
        }
        if a.parallel > MAX_PARALLEL {
            return Err(invalid(format!(
                "--parallel {}: at most {MAX_PARALLEL} streams. Each stream has a sender and a receiver thread of \
                 its own, and past a few hundred threads on a machine with {} CPUs the figures measure the \
                 scheduler switching threads, not the transport. For more concurrent streams, run several \
                 sockbench processes side by side (pin each with --cpus)",
                a.parallel,
                host.cpus.len()
            )));
        }
        if a.runtime == crate::engine::RuntimeKind::Multi && !engines.contains(&EngineKind::Async) {
            return Err(invalid(
                "--runtime applies to the async engine only: add --engine async (or drop --runtime)",
            ));
        }
        if extras.batch == 0 || extras.batch > MAX_BATCH {
            return Err(invalid(format!(
                "--batch must be between 1 and {MAX_BATCH} (the kernel takes at most {MAX_BATCH} messages per \
                 sendmmsg/recvmmsg call)"
            )));
        }
        if extras.timestamps && extras.batch > 1 {
            return Err(invalid(
                "--timestamps times each message's own send call: it cannot be combined with --batch (drop one)",
            ));
        }
        if a.sqpoll && !engines.contains(&EngineKind::IoUring) {
            return Err(invalid(
                "--sqpoll applies to the io-uring engine only: add --engine io-uring (or drop --sqpoll)",
            ));
        }
        if extras.linger0
            && !transports
                .iter()
                .any(|t| matches!(t, TransportKind::Tcp | TransportKind::Tcp6))
        {
            return Err(invalid(
                "--linger0 applies to tcp and tcp6 only (a Unix socket has no TIME_WAIT to skip)",
            ));
        }
        let sndbufs = parse_buffer_list("sndbuf", &a.sndbuf)?;
        let rcvbufs = parse_buffer_list("rcvbuf", &a.rcvbuf)?;
        let sndbuf = sndbufs.iter().copied().max().flatten();
        let cpus = a
            .cpus
            .cpus
            .as_ref()
            .map(|c| parse_cpus(host, c))
            .transpose()?;
        let bind = a.bind.as_deref().map(parse_bind).transpose()?;
        let connect = a
            .connect
            .as_deref()
            .map(|c| {
                c.trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .map_err(|_| {
                        invalid(format!(
                            "invalid --connect '{c}': give an IP address, e.g. 127.0.0.1"
                        ))
                    })
            })
            .transpose()?;

        // Options that only make sense for some transports.
        let any = |f: fn(TransportKind) -> bool| transports.iter().any(|&t| f(t));
        if (bind.is_some() || connect.is_some()) && !any(TransportKind::is_ip) {
            return Err(invalid(
                "--bind/--connect apply to tcp, tcp6, udp and udp6 only",
            ));
        }
        if a.nodelay && !any(|t| matches!(t, TransportKind::Tcp | TransportKind::Tcp6)) {
            return Err(invalid("--nodelay applies to tcp and tcp6 only"));
        }
        if a.rcvbuf.is_some() && !any(TransportKind::is_socket) {
            return Err(invalid("--rcvbuf applies to sockets only (pipes, mq and shm have one buffer: use --sndbuf)"));
        }
        if a.path.is_some() && !any(TransportKind::uses_path) {
            return Err(invalid(
                "--path applies to unix, unix-dgram, unix-seqpacket and fifo only",
            ));
        }
        if let Some(b) = bind {
            // Each connection binds anew: a fixed port is reused in sequence, which is fine,
            // but parallel streams would collide.
            if b.port() != 0 && a.parallel > 1 {
                return Err(invalid(
                    "--bind with a fixed port cannot serve --parallel streams: use port 0",
                ));
            }
            for &t in transports.iter().filter(|t| t.is_ip()) {
                if b.is_ipv6() != t.is_ipv6() && !all {
                    return Err(invalid(format!(
                        "--bind {b} is IPv{} but {t} is IPv{}: use {} or an address of the other family",
                        if b.is_ipv6() { 6 } else { 4 },
                        if t.is_ipv6() { 6 } else { 4 },
                        if t.is_ipv6() { t.name().trim_end_matches('6').to_string() } else { format!("{t}6") }
                    )));
                }
            }
        }
        if let Some(c) = connect {
            for &t in transports.iter().filter(|t| t.is_ip()) {
                if c.is_ipv6() != t.is_ipv6() && !all {
                    return Err(invalid(format!(
                        "--connect {c} is of the other IP family than {t}: use an IPv{} address",
                        if t.is_ipv6() { 6 } else { 4 }
                    )));
                }
            }
        }
        let largest = given.iter().copied().max().unwrap_or(64 << 10);
        // --batch: each role holds `batch` messages at once.
        let largest = largest.saturating_mul(u64::from(extras.batch));
        check_memory(host, largest, a.parallel, sndbuf)?;
        if let (Some(b), Some(c)) = (bind, connect) {
            if b.is_ipv6() != c.is_ipv6() {
                return Err(invalid(
                    "--bind and --connect must be of the same IP family",
                ));
            }
        }
        match &a.path {
            Some(p) => check_path(p, true)?,
            None if any(TransportKind::uses_path) => check_path(&default_dir_base(), false)?,
            None => {}
        }

        let template = Scenario {
            workload: kind,
            transport: transports[0],
            engine: engines[0],
            size: 0,
            stop,
            warmup,
            runs: a.runs.runs,
            parallel: a.parallel,
            cpus,
            sndbuf: None,
            rcvbuf: None,
            nodelay: a.nodelay,
            bind,
            connect,
            extras: WorkloadOptions {
                runtime: a.runtime,
                sqpoll: a.sqpoll,
                counters: a.counters,
                ..extras
            },
            live: None,
        };
        // What the workload cannot do at all comes before what the placement lacks.
        if a.bidir && !spec(kind).takes().both_ways {
            return Err(invalid(
                "--bidir applies to stream and rate (pingpong already goes both ways; connect's dialer is one side)",
            ));
        }
        let placement = placement_of(a)?;
        // Both roles pinned to one CPU of this host (a server's role is not pinned).
        let one_cpu = cpus
            .filter(|(s, r)| s == r && !a.allow_shared_cpu)
            .filter(|_| !matches!(placement, Where::Server { .. }))
            .map(|(s, _)| s);
        if a.allow_shared_cpu && !cpus.is_some_and(|(s, r)| s == r) {
            return Err(invalid(
                "--allow-shared-cpu applies only with both roles on one CPU (--cpus A,A): drop it",
            ));
        }
        let axes = matrix::Axes {
            transports: &transports,
            engines: &engines,
            sizes: sizes.as_deref(),
            sndbufs: &sndbufs,
            rcvbufs: &rcvbufs,
            explicit: !(all || all_engines),
            one_cpu,
        };
        if extras.timestamps && matches!(placement, Where::Server { .. }) {
            return Err(invalid(
                "--timestamps needs both roles on this host: with --server the kernel->kernel part would \
                 subtract two hosts' clocks (use --placement processes, or drop --timestamps)",
            ));
        }
        if extras.timestamps && a.bidir {
            return Err(invalid(
                "--timestamps times one direction of rate: drop --bidir",
            ));
        }
        if a.bidir && a.parallel > MAX_PARALLEL / 2 {
            return Err(invalid(format!(
                "--bidir runs -P streams each way: at most {} with --bidir",
                MAX_PARALLEL / 2
            )));
        }
        let (mut scenarios, mut skipped) = matrix::expand(host, &axes, &template)?;
        if matches!(placement, Where::Server { .. }) {
            // Pipes and socketpairs have no name a server could open.
            let anonymous =
                |t: TransportKind| matches!(t, TransportKind::Pipe | TransportKind::Socketpair);
            if let Some(sc) = scenarios
                .iter()
                .find(|s| anonymous(s.transport))
                .filter(|_| !all)
            {
                return Err(PlanError::Unsupported(format!(
                    "{} exists only inside one process tree, so a server cannot open it: use --placement processes, \
                     or fifo or unix with a server on this host",
                    sc.transport
                )));
            }
            for sc in scenarios.iter().filter(|s| anonymous(s.transport)) {
                skipped.push(Skipped {
                    workload: sc.workload,
                    transport: sc.transport,
                    engine: sc.engine,
                    size_bytes: sc.size,
                    reason: "no name a server could open (use --placement processes)".into(),
                });
            }
            scenarios.retain(|s| !anonymous(s.transport));
        }
        if !matches!(placement, Where::Server { .. }) {
            // Both roles on this host: the data goes through lo, whose MTU decides
            // whether a zero-copy receiver can map anything.
            let explicit = !(all || all_engines);
            let mut refused = Vec::new();
            scenarios.retain(
                |sc| match crate::workload::stream::loopback_recv_refusal(sc) {
                    Some(why) => {
                        refused.push((sc.clone(), why));
                        false
                    }
                    None => true,
                },
            );
            if let Some((_, why)) = refused.first().filter(|_| explicit) {
                return Err(PlanError::Unsupported(why.clone()));
            }
            skipped.extend(refused.into_iter().map(|(sc, reason)| Skipped {
                workload: sc.workload,
                transport: sc.transport,
                engine: sc.engine,
                size_bytes: sc.size,
                reason,
            }));
        }
        for sc in &mut scenarios {
            sc.bind = sc.bind.filter(|_| sc.transport.is_ip());
            sc.connect = sc.connect.filter(|_| sc.transport.is_ip());
        }
        let mut notes = unavailable;
        notes.extend(own_address_note(bind.map(|b| b.ip()), connect));
        for sc in scenarios
            .iter()
            .filter(|s| s.transport == TransportKind::Mq)
        {
            let Some(n) = sc.sndbuf else { continue };
            let asked = (n / sc.size).max(1);
            let max = crate::transport::mq_max_depth();
            let note = format!(
                "mq {}: --sndbuf {} asks for a queue of {asked} messages, but the kernel allows {max} \
                 (fs.mqueue.msg_max): the queue holds {max}; raise it with `sysctl -w fs.mqueue.msg_max={asked}`",
                format_bytes(sc.size),
                format_bytes(n)
            );
            if asked > max && !notes.contains(&note) {
                notes.push(note);
            }
        }
        if scenarios.is_empty() && extras.batch > 1 {
            return Err(PlanError::Unsupported(format!(
                "nothing to run: nothing in the plan can batch (--batch {}): batching takes a datagram \
                 transport (udp, udp6, unix-dgram, unix-seqpacket), or stream on --engine io-uring; \
                 drop --batch for the others",
                extras.batch
            )));
        }
        if scenarios.is_empty() {
            // Everything left out for sharing a CPU: say why, not only that.
            let shared = (skipped.iter())
                .find(|s| one_cpu.is_some() && s.reason.contains("--allow-shared-cpu"));
            if let Some(s) = shared {
                return Err(PlanError::Unsupported(format!(
                    "nothing to run: {}",
                    s.reason
                )));
            }
            return Err(PlanError::Unsupported(
                "nothing to run: every transport/size combination was refused".into(),
            ));
        }
        Ok(Plan {
            scenarios,
            skipped,
            output,
            layout: Layout::List,
            path: a.path.clone(),
            notes,
            placement,
            interval,
        })
    }
}

/// The first scenario `sockbench ARGV...` plans (for unit tests elsewhere).
#[cfg(test)]
pub(crate) fn first_scenario(argv: &[&str]) -> Scenario {
    let mut v = vec!["sockbench"];
    v.extend_from_slice(argv);
    Plan::from_args(&<Args as clap::Parser>::parse_from(v))
        .expect("a valid command line")
        .scenarios
        .remove(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn plan(argv: &[&str]) -> Result<Plan, PlanError> {
        let mut v = vec!["sockbench"];
        v.extend_from_slice(argv);
        Plan::from_args(&Args::try_parse_from(v).unwrap())
    }

    #[test]
    fn socket_buffers_are_an_axis_and_a_receive_buffer_only_a_sockets() {
        let p = plan(&[
            "stream",
            "-t",
            "tcp,pipe",
            "-s",
            "64K",
            "--rcvbuf",
            "1,4K..16K",
        ])
        .unwrap();
        let got: Vec<(TransportKind, Option<u64>)> = p
            .scenarios
            .iter()
            .map(|s| (s.transport, s.rcvbuf))
            .collect();
        assert_eq!(
            got,
            [
                (TransportKind::Tcp, Some(1)),
                (TransportKind::Tcp, Some(4096)),
                (TransportKind::Tcp, Some(8192)),
                (TransportKind::Tcp, Some(16384)),
                (TransportKind::Pipe, None),
            ]
        );
        let p = plan(&[
            "stream", "-t", "unix", "--sndbuf", "8K,64K", "--rcvbuf", "8K,64K",
        ])
        .unwrap();
        let got: Vec<(Option<u64>, Option<u64>)> =
            p.scenarios.iter().map(|s| (s.sndbuf, s.rcvbuf)).collect();
        let (a, b) = (Some(8192), Some(65536));
        assert_eq!(got, [(a, a), (a, b), (b, a), (b, b)]);
        assert!(plan(&["stream", "-t", "tcp"]).unwrap().scenarios[0]
            .sndbuf
            .is_none());
        // The largest buffer the kernel's signed 32-bit count can double, and no more.
        assert!(plan(&["stream", "-t", "tcp", "--rcvbuf", "1G"]).is_ok());
        for bad in ["0", "1,0", "abc", "2G", "1073741825", "8K..4K"] {
            let e = plan(&["stream", "-t", "tcp", "--rcvbuf", bad]).unwrap_err();
            assert!(matches!(e, PlanError::Invalid(_)), "{bad}: {e}");
            assert!(e.to_string().contains("--rcvbuf"), "{bad}: {e}");
        }
        assert!(plan(&["stream", "-t", "pipe", "--rcvbuf", "4K,8K"])
            .unwrap_err()
            .to_string()
            .contains("sockets only"));
    }

    #[test]
    fn no_arguments_is_the_suite_of_every_transport_at_four_sizes() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.layout, Layout::Suite);
        let of = |w: WorkloadKind| p.scenarios.iter().filter(|s| s.workload == w).count();
        let n = TransportKind::ALL.len();
        assert_eq!(of(WorkloadKind::Stream) + p.skipped.len(), n * 4);
        assert_eq!(of(WorkloadKind::Pingpong), n);
        assert_eq!(of(WorkloadKind::Rate), 5, "the five message transports");
        // UDP cannot carry 64 KiB or 1 MiB datagrams.
        assert!(p
            .skipped
            .iter()
            .any(|s| s.transport == TransportKind::Udp && s.size_bytes == 1 << 20));
    }

    #[test]
    fn fails_for_unknown_transport() {
        let e = plan(&["stream", "-t", "tcp,carrier-pigeon"]).unwrap_err();
        assert!(
            e.to_string().contains("unknown transport 'carrier-pigeon'"),
            "{e}"
        );
    }

    #[test]
    fn fails_for_size_zero_and_garbage() {
        assert!(plan(&["stream", "-s", "0"])
            .unwrap_err()
            .to_string()
            .contains("at least 1 byte"));
        assert!(plan(&["stream", "-s", "abc"])
            .unwrap_err()
            .to_string()
            .contains("invalid size 'abc'"));
    }

    #[test]
    fn udp_size_limit_names_the_limit() {
        let e = plan(&["stream", "-t", "udp", "-s", "64K"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("65507"), "{e}");
    }

    #[test]
    fn unix_dgram_limit_names_the_sysctl() {
        let e = plan(&["stream", "-t", "unix-dgram", "-s", "64M"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("net.core.wmem"), "{e}");
    }

    #[test]
    fn all_transports_skip_what_cannot_carry_the_size() {
        let p = plan(&["stream", "-t", "all", "-s", "1M"]).unwrap();
        assert!(p.skipped.iter().any(|s| s.transport == TransportKind::Udp6));
        assert!(p
            .scenarios
            .iter()
            .any(|s| s.transport == TransportKind::Tcp));
    }

    #[test]
    fn options_that_do_not_apply_are_refused() {
        assert!(plan(&["stream", "-t", "unix", "--nodelay"]).is_err());
        assert!(plan(&["stream", "-t", "pipe", "--bind", "127.0.0.1"]).is_err());
        assert!(plan(&["stream", "-t", "tcp6", "--bind", "127.0.0.1"]).is_err());
    }

    #[test]
    fn long_unix_path_is_refused() {
        let long = format!("/tmp/{}", "d".repeat(100));
        let e = plan(&["stream", "-t", "unix", "--path", &long])
            .unwrap_err()
            .to_string();
        assert!(e.contains("107"), "{e}");
    }

    #[test]
    fn count_and_bytes_set_the_stop() {
        let p = plan(&["stream", "-n", "1000"]).unwrap();
        assert_eq!(p.scenarios[0].stop, Stop::Count(1000));
        let p = plan(&["stream", "--bytes", "1M"]).unwrap();
        assert_eq!(p.scenarios[0].stop, Stop::Bytes(1 << 20));
    }

    #[test]
    fn a_named_combination_is_an_error_and_under_all_a_skip_naming_all_four() {
        // Named explicitly: the error names the limit.
        let e = plan(&["stream", "-t", "shm", "-e", "poll"]).unwrap_err();
        assert!(matches!(e, PlanError::Unsupported(_)), "{e}");
        assert!(
            e.to_string().contains("engine poll cannot drive shm"),
            "{e}"
        );
        let e = plan(&["connect", "-t", "tcp", "-e", "epoll"]).unwrap_err();
        assert!(e.to_string().contains("blocking engine only"), "{e}");
        // Under `all`: one skip per combination, each with its workload, engine and size.
        let p = plan(&["stream", "-t", "shm,udp", "-e", "all", "-s", "64,1M"]).unwrap();
        let shm_poll: Vec<u64> = p
            .skipped
            .iter()
            .filter(|s| s.transport == TransportKind::Shm && s.engine == EngineKind::Poll)
            .map(|s| s.size_bytes)
            .collect();
        assert_eq!(shm_poll, [64, 1 << 20], "sizes recorded, not 0");
        let udp_big = p
            .skipped
            .iter()
            .find(|s| s.transport == TransportKind::Udp && s.engine == EngineKind::Blocking)
            .expect("udp cannot carry 1 MiB");
        assert_eq!(udp_big.size_bytes, 1 << 20);
        assert!(udp_big.reason.contains("65507"), "{}", udp_big.reason);
        assert!(p.skipped.iter().all(|s| s.workload == WorkloadKind::Stream));
        // connect under every engine: blocking runs, the others are skipped.
        let p = plan(&["connect", "-t", "tcp", "-e", "all"]).unwrap();
        assert!(p.scenarios.iter().all(|s| s.engine == EngineKind::Blocking));
        assert!(p
            .skipped
            .iter()
            .all(|s| s.workload == WorkloadKind::Connect && s.engine != EngineKind::Blocking));
    }

    /// Issue 29: a role that waits by spinning, pinned to its peer's CPU, measures the
    /// scheduler; `--cpus A,A` refuses it (a skip under `all`) unless asked for.
    #[test]
    fn both_roles_on_one_cpu_are_refused_for_a_spinning_engine_or_transport_unless_allowed() {
        let mut host = Host::probe();
        host.cpus = vec![0, 1];
        let on = |argv: &[&str]| {
            let mut v = vec!["sockbench"];
            v.extend_from_slice(argv);
            Plan::from_args_on(&Args::parse_from(v), &host)
        };
        for (argv, names) in [
            (
                &["stream", "-t", "pipe", "-e", "nonblocking", "--cpus", "0,0"][..],
                "engine nonblocking",
            ),
            (
                &["pingpong", "-t", "shm", "--cpus", "1,1"][..],
                "transport shm",
            ),
            (
                &["rate", "-t", "udp", "-e", "nonblocking", "--cpus", "0"][..],
                "engine nonblocking",
            ),
            (
                &[
                    "stream",
                    "-t",
                    "pipe",
                    "-e",
                    "nonblocking",
                    "--cpus",
                    "0,0",
                    "--placement",
                    "processes",
                ][..],
                "engine nonblocking",
            ),
        ] {
            let e = on(argv).unwrap_err();
            assert!(matches!(e, PlanError::Unsupported(_)), "{argv:?}: {e}");
            let e = e.to_string();
            assert!(e.starts_with(names), "{argv:?}: {e}");
            assert!(e.contains("--allow-shared-cpu"), "{argv:?}: {e}");
            let mut forced = argv.to_vec();
            forced.push("--allow-shared-cpu");
            assert!(on(&forced).is_ok(), "{forced:?}");
        }
        // Apart, or not spinning: no refusal.
        assert!(on(&["stream", "-t", "pipe", "-e", "nonblocking", "--cpus", "0,1"]).is_ok());
        assert!(on(&[
            "stream",
            "-t",
            "pipe",
            "-e",
            "blocking,epoll",
            "--cpus",
            "0,0"
        ])
        .is_ok());
        // The flag means nothing without both roles on one CPU.
        let e = on(&[
            "stream",
            "-t",
            "pipe",
            "--cpus",
            "0,1",
            "--allow-shared-cpu",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("--cpus A,A"), "{e}");
        // Under `all`, the spinning ones are skipped with the reason; the others run.
        let p = on(&["stream", "-t", "pipe,shm", "-e", "all", "--cpus", "0,0"]).unwrap();
        assert!(p.scenarios.iter().all(|s| s.spinner().is_none()));
        assert!(p.scenarios.iter().any(|s| s.engine == EngineKind::Blocking));
        for (t, e) in [
            (TransportKind::Pipe, EngineKind::Nonblocking),
            (TransportKind::Shm, EngineKind::Blocking),
        ] {
            let skip = p.skipped.iter().find(|s| s.transport == t && s.engine == e);
            assert!(
                skip.is_some_and(|s| s.reason.contains("--allow-shared-cpu")),
                "{t} {e}: {:?}",
                p.skipped
            );
        }
        // Nothing left to run: the error says why.
        let e = on(&["stream", "-t", "shm", "-e", "all", "--cpus", "0,0"]).unwrap_err();
        assert!(e.to_string().contains("spinning"), "{e}");
    }

    #[test]
    fn the_plan_reads_the_machine_from_the_host_it_is_given() {
        let args = <Args as clap::Parser>::parse_from([
            "sockbench",
            "stream",
            "-t",
            "unix-dgram",
            "-s",
            "100K",
        ]);
        let mut host = Host::probe();
        host.limits.wmem_default = 1 << 20;
        host.limits.wmem_max = 1 << 20;
        assert!(
            Plan::from_args_on(&args, &host).is_ok(),
            "a 1 MiB default buffer carries 100 KiB"
        );
        host.limits.wmem_default = 65_536;
        let e = Plan::from_args_on(&args, &host).unwrap_err().to_string();
        assert!(e.contains("net.core.wmem_default = 65536"), "{e}");
        host.cpus = vec![3];
        let args = <Args as clap::Parser>::parse_from(["sockbench", "stream", "--cpus", "0,1"]);
        let e = Plan::from_args_on(&args, &host).unwrap_err().to_string();
        assert!(
            e.contains("CPU 0 is not one") && e.contains("may use 3"),
            "{e}"
        );
    }

    #[test]
    fn the_largest_message_a_transport_carries_is_allowed_and_one_more_byte_is_not() {
        assert!(plan(&["stream", "-t", "udp", "-s", "65507"]).is_ok());
        let e = plan(&["stream", "-t", "udp", "-s", "65508"]).unwrap_err();
        assert!(e.to_string().contains("65507"), "{e}");
    }

    #[test]
    fn an_address_of_this_host_is_said_to_go_through_loopback() {
        assert_eq!(own_address_note(None, None), None);
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(
            own_address_note(Some(lo), None),
            None,
            "loopback is loopback"
        );
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert!(own_address_note(Some(any), None)
            .unwrap()
            .contains("loopback device (lo)"));
        // Not an address of this host (TEST-NET-3): no claim about it.
        let far: IpAddr = "203.0.113.77".parse().unwrap();
        assert_eq!(own_address_note(Some(far), None), None);
        assert_eq!(
            own_address_note(Some(any), Some(far)),
            None,
            "--connect decides"
        );
        // An interface's own address, when this machine has one.
        let own = std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.connect("192.0.2.200:9").map(|_| s))
            .and_then(|s| s.local_addr())
            .map(|a| a.ip())
            .ok()
            .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
        match own {
            Some(ip) => {
                let note = own_address_note(Some(ip), None).expect("an address of this host");
                assert!(
                    note.starts_with(&format!("{ip} is an address of this host")),
                    "{note}"
                );
                let p =
                    plan(&["stream", "-t", "tcp", "--bind", &ip.to_string(), "-n", "10"]).unwrap();
                assert!(
                    p.notes.iter().any(|n| n.contains("loopback device")),
                    "{:?}",
                    p.notes
                );
            }
            None => {
                eprintln!("skipped: no route to a non-loopback address to find this host's own")
            }
        }
    }

    #[test]
    fn a_deeper_queue_than_the_kernel_allows_is_a_note_naming_its_depth() {
        // Without CAP_SYS_RESOURCE the kernel allows fs.mqueue.msg_max messages.
        if crate::environment::has_cap_sys_resource() {
            eprintln!("skipped: with CAP_SYS_RESOURCE the queue may be 65536 deep");
            return;
        }
        let msg_max: u64 = std::fs::read_to_string("/proc/sys/fs/mqueue/msg_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let p = plan(&["stream", "-t", "mq", "-s", "1K", "--sndbuf", "64M"]).unwrap();
        let want = format!("asks for a queue of 65536 messages, but the kernel allows {msg_max} ");
        assert!(p.notes.iter().any(|n| n.contains(&want)), "{:?}", p.notes);
    }
}

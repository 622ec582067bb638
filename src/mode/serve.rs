//! `sockbench serve`: an HTTP/1.1 server with the chosen concurrency model
//! (`crate::model`), on a TCP port or a Unix socket, until Ctrl-C or `--duration`; then
//! what it served, and the CPU it took, on stderr (or as JSON on stdout).
//!
//! The first line on stderr names the URL it listens on (`http://ADDR:PORT/`, or the
//! socket file); `sockbench models` and the tests read the port from it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use socket2::{Domain, SockAddr, Socket, Type};

use super::{FAILED, INTERRUPTED};
use crate::cli::{Format, OutputArgs, ServeArgs};
use crate::http::{session::MAX_BODY, Counters, Site};
use crate::measure::units::{format_bytes, format_per_second, parse_duration, parse_size};
use crate::model::{Ctx, Listener, ModelKind};

/// Version of the serve summary's JSON document.
pub const SERVE_SCHEMA_VERSION: u32 = 2;

/// What `serve` was asked to do, checked.
#[derive(Debug)]
pub struct Setup {
    /// The model.
    pub model: ModelKind,
    /// TCP address, or else...
    pub addr: Option<SocketAddr>,
    /// ...the Unix socket file.
    pub unix: Option<PathBuf>,
    /// listen(2)'s backlog.
    pub backlog: i32,
    /// Response body bytes.
    pub body_size: usize,
    /// Threads for the models that take them.
    pub threads: usize,
    /// Idle timeout.
    pub idle_timeout: Duration,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// CPUs to pin to.
    pub cpus: Vec<usize>,
    /// Log level.
    pub verbose: u8,
    /// Summary as JSON on stdout.
    pub json: bool,
}

/// The summary `serve` prints when it stops (`--format json`).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeReport {
    /// Always `sockbench-serve`.
    pub document: String,
    /// [`SERVE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The command line.
    pub command: Vec<String>,
    /// The model.
    pub model: ModelKind,
    /// Where it listened (`http://ADDR:PORT/` or the socket file).
    pub url: String,
    /// listen(2)'s backlog.
    pub backlog: u32,
    /// Bytes of each 200's body.
    pub body_bytes: u64,
    /// Threads of the pool, epoll-workers or async models (null for the others).
    pub threads: Option<u64>,
    /// From listening to stopping.
    pub duration_seconds: f64,
    /// Every request answered (any status).
    pub requests: u64,
    /// From the first answer to the last: the time the server was busy (null with fewer
    /// than two answers).
    pub busy_seconds: Option<f64>,
    /// Requests answered per second while busy (`requests` over `busy_seconds`), as a load
    /// generator sees it; not over the uptime, which counts the wait for the first
    /// client and the time after the last (null with fewer than two answers).
    pub requests_per_second: Option<f64>,
    /// What the server counted.
    #[serde(flatten)]
    pub counters: Counters,
    /// User CPU of the whole server process over the time.
    pub cpu_user_seconds: f64,
    /// System CPU of the whole server process over the time.
    pub cpu_system_seconds: f64,
    /// CPU seconds per answered request (null when none was).
    pub cpu_seconds_per_request: Option<f64>,
    /// Ctrl-C (or SIGTERM) stopped it, rather than --duration.
    pub interrupted: bool,
    /// Why the server failed (then most figures are absent), or null.
    pub error: Option<String>,
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    super::usage_error(msg)
}

/// The CPUs this process may run on (its affinity mask: a cpuset or `taskset` narrows it).
pub fn allowed_cpus() -> Vec<usize> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Parse a CPU list (`0`, `0,1`), each one this process may run on.
///
/// # Errors
/// A CPU that is not a number or not in this process's affinity mask.
pub fn parse_cpus(text: &str, flag: &str) -> Result<Vec<usize>, String> {
    let allowed = allowed_cpus();
    text.split(',')
        .map(|c| {
            let cpu: usize = c
                .trim()
                .parse()
                .map_err(|_| format!("{flag}: '{c}' is not a CPU number (e.g. 0 or 0,1)"))?;
            if !allowed.is_empty() && !allowed.contains(&cpu) {
                return Err(format!(
                    "{flag}: CPU {cpu} is not one this process may use (allowed: {})",
                    allowed
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            Ok(cpu)
        })
        .collect()
}

/// Check the flags.
///
/// # Errors
/// The message for a usage error.
pub fn setup(args: &ServeArgs, format: Format) -> Result<Setup, String> {
    let model = ModelKind::parse(&args.model)?;
    model
        .available()
        .map_err(|why| format!("the {model} model cannot run here: {why}"))?;
    let json = match format {
        Format::Table => false,
        Format::Json => true,
        other => {
            return Err(format!(
                "serve prints its summary as text (the default) or --format json, not {other:?}"
            ))
        }
    };
    let body_size = parse_size(&args.body_size).map_err(|e| format!("--body-size: {e}"))?;
    if body_size > MAX_BODY {
        return Err(format!("--body-size is at most {}", format_bytes(MAX_BODY)));
    }
    if args.backlog == 0 || args.backlog > i32::MAX as u32 {
        return Err("--backlog must be at least 1".into());
    }
    let idle_timeout =
        parse_duration(&args.idle_timeout).map_err(|e| format!("--idle-timeout: {e}"))?;
    if idle_timeout.is_zero() {
        return Err("--idle-timeout must be more than 0".into());
    }
    let duration = args
        .duration
        .as_deref()
        .map(|d| parse_duration(d).map_err(|e| format!("--duration: {e}")))
        .transpose()?;
    let cpus = match &args.cpus {
        Some(t) => parse_cpus(t, "--cpus")?,
        None => Vec::new(),
    };
    let threads = match args.threads {
        Some(0) => return Err("--threads must be at least 1".into()),
        Some(n) if n > 1024 => return Err("--threads is at most 1024".into()),
        Some(n) => n,
        None if !cpus.is_empty() => cpus.len(),
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let (addr, unix) = match &args.unix {
        Some(p) => {
            let len = p.as_os_str().len();
            if len > crate::plan::UNIX_PATH_MAX {
                return Err(format!(
                    "--unix {} is {len} bytes; a Unix socket path holds at most {} (choose a shorter one)",
                    p.display(),
                    crate::plan::UNIX_PATH_MAX
                ));
            }
            (None, Some(p.clone()))
        }
        None => {
            let ip: IpAddr = args
                .address
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .map_err(|_| {
                    format!(
                        "invalid --address '{}': give an IP address, e.g. 127.0.0.1 or ::1",
                        args.address
                    )
                })?;
            (Some(SocketAddr::new(ip, args.port)), None)
        }
    };
    Ok(Setup {
        model,
        addr,
        unix,
        backlog: args.backlog as i32,
        body_size: body_size as usize,
        threads,
        idle_timeout,
        duration,
        cpus,
        verbose: args.verbose,
        json,
    })
}

/// The socket file, removed when the server ends.
struct SocketFile(Option<PathBuf>);

impl Drop for SocketFile {
    fn drop(&mut self) {
        if let Some(f) = &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Bind and listen; the URL to show, and the file to remove.
fn bind(setup: &Setup) -> anyhow::Result<(Listener, String, SocketFile)> {
    let (addr, domain, file) = match (&setup.addr, &setup.unix) {
        (Some(a), _) => (SockAddr::from(*a), Domain::for_address(*a), None),
        (None, Some(p)) => {
            if p.symlink_metadata().is_ok() {
                anyhow::bail!(
                    "{} already exists: remove it, or choose another --unix path",
                    p.display()
                );
            }
            let a = SockAddr::unix(p)
                .with_context(|| format!("cannot use {} as a socket path", p.display()))?;
            (a, Domain::UNIX, Some(p.clone()))
        }
        (None, None) => anyhow::bail!("nowhere to listen"),
    };
    let socket = Socket::new(domain, Type::STREAM, None).context("cannot create the socket")?;
    if domain != Domain::UNIX {
        socket.set_reuse_address(true)?;
        if setup.model == ModelKind::EpollWorkers {
            socket.set_reuse_port(true)?;
        }
        if domain == Domain::IPV6 {
            socket.set_only_v6(true)?;
        }
    }
    socket.bind(&addr).map_err(|e| match (e.kind(), setup.addr) {
        (std::io::ErrorKind::AddrInUse, Some(a)) => anyhow::anyhow!(
            "cannot listen on {a}: the port is in use (stop what holds it, or use --port 0 for a free one)"
        ),
        (std::io::ErrorKind::PermissionDenied, Some(a)) => anyhow::anyhow!(
            "cannot listen on {a}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
        ),
        (std::io::ErrorKind::AddrNotAvailable, Some(a)) => {
            anyhow::anyhow!("cannot listen on {a}: no such address on this host")
        }
        _ => anyhow::Error::new(e).context(format!(
            "cannot bind {}",
            file.as_deref().map_or_else(String::new, |f| f.display().to_string())
        )),
    })?;
    let file = SocketFile(file);
    socket.listen(setup.backlog).context("cannot listen")?;
    let local = socket.local_addr()?;
    let url = match (local.as_socket(), &file.0) {
        (Some(a), _) => format!("http://{a}/"),
        (None, Some(p)) => format!("unix:{}", p.display()),
        (None, None) => String::new(),
    };
    Ok((
        Listener {
            socket,
            addr: local,
            backlog: setup.backlog,
        },
        url,
        file,
    ))
}

/// Run `sockbench serve`.
pub fn run(args: &ServeArgs, output: &OutputArgs, argv: Vec<String>) -> ExitCode {
    if !output.report_exports().is_empty() {
        return usage("serve prints its summary when it stops (--format json for JSON); --export-* do not apply");
    }
    let setup = match setup(args, output.format) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    if let Err(e) = crate::interrupt::install() {
        eprintln!("sockbench: error: cannot handle Ctrl-C: {e}");
        return ExitCode::from(FAILED);
    }
    match serve(&setup, argv.clone()) {
        Ok(report) => {
            print(&report, setup.json);
            if report.interrupted {
                ExitCode::from(INTERRUPTED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("sockbench: error: {e:#}");
            if setup.json {
                // Even a failure is a JSON document, with the failure in it.
                let doc = serde_json::json!({
                    "document": "sockbench-serve",
                    "schema_version": SERVE_SCHEMA_VERSION,
                    "command": argv,
                    "model": setup.model,
                    "error": format!("{e:#}"),
                });
                println!("{doc:#}");
            }
            ExitCode::from(FAILED)
        }
    }
}

/// This process's CPU time (user, system) so far.
fn process_cpu() -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or((0.0, 0.0), |u| {
        let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        (s(u.user_time()), s(u.system_time()))
    })
}

/// Serve until stopped; the summary.
///
/// # Errors
/// The socket cannot be bound, or the model fails.
pub fn serve(setup: &Setup, command: Vec<String>) -> anyhow::Result<ServeReport> {
    let (listener, url, _file) = bind(setup)?;
    let threads = setup.model.takes_threads().then_some(setup.threads);
    crate::testhooks::hold("serve-listen");
    eprintln!(
        "sockbench serve: {} model listening on {url} (backlog {}, body {}{}); Ctrl-C to stop",
        setup.model,
        setup.backlog,
        format_bytes(setup.body_size as u64),
        threads.map_or(String::new(), |t| format!(", {t} threads")),
    );
    let start = Instant::now();
    let ctx = Ctx::new(
        Site::new(setup.body_size, setup.verbose),
        setup.duration.map(|d| start + d),
        setup.threads,
        setup.idle_timeout,
        setup.cpus.clone(),
    );
    let (u0, s0) = process_cpu();
    let counters = crate::model::serve(setup.model, listener, &ctx)?;
    let (u1, s1) = process_cpu();
    let elapsed = start.elapsed().as_secs_f64();
    let requests = counters.responses();
    let cpu = (u1 - u0).max(0.0) + (s1 - s0).max(0.0);
    let busy = match counters.answered_span_ns {
        Some((first, last)) if requests >= 2 => Some((last - first) as f64 / 1e9),
        _ => None,
    };
    Ok(ServeReport {
        document: "sockbench-serve".into(),
        schema_version: SERVE_SCHEMA_VERSION,
        command,
        model: setup.model,
        url,
        backlog: setup.backlog as u32,
        body_bytes: setup.body_size as u64,
        threads: threads.map(|t| t as u64),
        duration_seconds: elapsed,
        requests,
        busy_seconds: busy,
        // n answers span n - 1 gaps: the rate between the first and the last.
        requests_per_second: busy.filter(|&b| b > 0.0).map(|b| (requests - 1) as f64 / b),
        counters,
        cpu_user_seconds: (u1 - u0).max(0.0),
        cpu_system_seconds: (s1 - s0).max(0.0),
        cpu_seconds_per_request: (requests > 0).then(|| cpu / requests as f64),
        interrupted: crate::interrupt::requested(),
        error: None,
    })
}

/// The summary: JSON on stdout, or lines on stderr.
fn print(r: &ServeReport, json: bool) {
    if json {
        if let Ok(text) = serde_json::to_string_pretty(r) {
            println!("{text}");
        }
        return;
    }
    let c = &r.counters;
    let refused = c.responses_400 + c.responses_431 + c.responses_501 + c.responses_505;
    eprintln!(
        "sockbench serve: {} model served {} requests ({} 200, {refused} refused: {} 400, {} 431, {} 501, {} 505) on {} connections in {:.3} s, busy {}: {}",
        r.model,
        r.requests,
        c.responses_2xx,
        c.responses_400,
        c.responses_431,
        c.responses_501,
        c.responses_505,
        c.connections,
        r.duration_seconds,
        r.busy_seconds.map_or("-".into(), crate::measure::units::format_seconds),
        r.requests_per_second.map_or("-".into(), |v| format_per_second(v).replace("/s", " requests/s while busy")),
    );
    eprintln!(
        "  received {}, sent {}; connections closed by clients {}, by the server {}, idle {}, on errors {}, open at the stop {}; refused {}",
        format_bytes(c.bytes_received),
        format_bytes(c.bytes_sent),
        c.closed_by_client,
        c.closed_by_server,
        c.timed_out,
        c.errors,
        c.closed_at_stop,
        c.refused,
    );
    eprintln!(
        "  CPU {:.3} s user + {:.3} s system{}",
        r.cpu_user_seconds,
        r.cpu_system_seconds,
        r.cpu_seconds_per_request.map_or(String::new(), |s| format!(
            " = {:.2} us per request",
            s * 1e6
        )),
    );
}

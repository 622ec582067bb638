//! `sockbench serve`: an HTTP/1.1 server with the chosen concurrency model
//! (`crate::model`), on a TCP port or a Unix socket, until Ctrl-C or `--duration`; then
//! what it served, and the CPU it took, on stderr (or as JSON on stdout).
//!
//! The first line on stderr names the URL it listens on (`http://ADDR:PORT/`, or the
//! socket file); `sockbench models` and the tests read the port from it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use socket2::{Domain, SockAddr, Socket, Type};

use crate::cli::ServeArgs;
use crate::document::serve::{ServeBody, ServeReport};
use crate::error::{CommandResult, Outcome, PlanError};
use crate::http::{session::MAX_BODY, Site};
use crate::model::{Ctx, Listener, ModelKind};
use crate::report::grid::Grid;
use crate::report::openmetrics::Family;
use crate::report::output::{self, Head, Records, Rendered};
use crate::report::{Envelope, Kind};
use crate::vocab::units::{format_bytes, format_per_second, parse_duration, parse_size};
use crate::vocab::View;

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

/// Check the flags.
///
/// # Errors
/// A usage error, or a model this system cannot run ([`PlanError::Unavailable`]).
pub fn setup(args: &ServeArgs) -> Result<Setup, PlanError> {
    let model = ModelKind::parse(&args.model)?;
    model.available().map_err(|why| {
        PlanError::Unavailable(format!("the {model} model cannot run here: {why}"))
    })?;
    let body_size = parse_size(&args.body_size).map_err(|e| format!("--body-size: {e}"))?;
    if body_size > MAX_BODY {
        return Err(format!("--body-size is at most {}", format_bytes(MAX_BODY)).into());
    }
    if args.backlog == 0 || args.backlog > i32::MAX as u32 {
        return Err("--backlog must be at least 1".into());
    }
    let idle_timeout =
        parse_duration(&args.idle_timeout).map_err(|e| format!("--idle-timeout: {e}"))?;
    if idle_timeout.is_zero() {
        return Err("--idle-timeout must be more than 0".into());
    }
    let duration = args.duration.parsed()?;
    let cpus = match &args.cpus.cpus {
        Some(list) => {
            list.within(&allowed_cpus())?;
            list.0.clone()
        }
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
            if len > crate::transport::UNIX_PATH_MAX {
                return Err(format!(
                    "--unix {} is {len} bytes; a Unix socket path holds at most {} (choose a shorter one)",
                    p.display(),
                    crate::transport::UNIX_PATH_MAX
                ).into());
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
///
/// # Errors
/// A usage error (a failure to serve is in the document).
pub fn run(args: &ServeArgs, argv: Vec<String>) -> CommandResult {
    let output = &args.output;
    let setup = setup(args)?;
    let exports = super::exports(output)?;
    super::catch_interrupts()?;
    let mut envelope = Envelope::starting(argv);
    let outcome = serve(&setup);
    envelope.end();
    let body = match outcome {
        Ok(body) => body,
        Err(e) => {
            envelope.error = Some(format!("{e:#}"));
            ServeBody {
                model: Some(setup.model),
                ..ServeBody::default()
            }
        }
    };
    let report = ServeReport { envelope, body };
    // Even a failure is a document, with the failure in it.
    exports.finish(&report);
    let unwritten = super::emit(&report, output, &exports);
    let envelope = &report.envelope;
    Ok(Outcome::of(envelope.interrupted, false)
        .and_errors(envelope.error.clone())
        .and_errors(unwritten))
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
pub fn serve(setup: &Setup) -> anyhow::Result<ServeBody> {
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
    Ok(ServeBody {
        model: Some(setup.model),
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
    })
}

impl Rendered for ServeReport {
    fn head(&self) -> Head<'_> {
        Head::of(Kind::Serve, &self.envelope)
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        output::pretty(&self.document())
    }

    fn tables(&self, _view: &View) -> Vec<Grid> {
        let r = &self.body;
        let c = &r.counters;
        let refused = c.responses_400 + c.responses_431 + c.responses_501 + c.responses_505;
        let model = r.model.map_or_else(|| "-".to_string(), |m| m.to_string());
        if self.envelope.error.is_some() {
            // It never served: no table (the error is on stderr).
            return Vec::new();
        }
        let title = format!("sockbench serve: {model} model on {}", r.url);
        let rows = vec![
            (
                "requests",
                format!(
                    "{} ({} 200, {refused} refused)",
                    r.requests, c.responses_2xx
                ),
            ),
            (
                "refused",
                format!(
                    "{} 400, {} 431, {} 501, {} 505",
                    c.responses_400, c.responses_431, c.responses_501, c.responses_505
                ),
            ),
            (
                "requests/s while busy",
                r.requests_per_second.map_or("-".into(), format_per_second),
            ),
            (
                "busy",
                r.busy_seconds
                    .map_or("-".into(), crate::vocab::units::format_seconds),
            ),
            (
                "up",
                crate::vocab::units::format_seconds(r.duration_seconds),
            ),
            (
                "connections",
                format!("{} ({} refused)", c.connections, c.refused),
            ),
            (
                "closed",
                format!(
                    "{} by clients, {} by the server, {} idle, {} on errors, {} at the stop",
                    c.closed_by_client, c.closed_by_server, c.timed_out, c.errors, c.closed_at_stop
                ),
            ),
            (
                "bytes",
                format!(
                    "{} received, {} sent",
                    format_bytes(c.bytes_received),
                    format_bytes(c.bytes_sent)
                ),
            ),
            (
                "CPU",
                format!(
                    "{:.3} s user + {:.3} s system{}",
                    r.cpu_user_seconds,
                    r.cpu_system_seconds,
                    r.cpu_seconds_per_request.map_or(String::new(), |s| format!(
                        " = {:.2} µs per request",
                        s * 1e6
                    ))
                ),
            ),
        ];
        vec![output::pairs(Some(title), rows)]
    }

    fn records(&self) -> Records {
        output::records_of(
            &[serde_json::to_value(&self.body).unwrap_or_default()],
            &serde_json::Value::Null,
        )
    }

    fn metrics(&self) -> Vec<Family> {
        let model = self
            .body
            .model
            .map_or_else(|| "-".to_string(), |m| m.to_string());
        let mut body = serde_json::to_value(&self.body).unwrap_or_default();
        if let Some(o) = body.as_object_mut() {
            o.remove("backlog");
            o.remove("threads");
        }
        output::gauges(Kind::Serve, "The server", &[(vec![("model", model)], body)])
    }

    fn count(&self) -> String {
        output::counted(self.body.requests as usize, "request")
    }

    fn charts(&self) -> Vec<crate::report::chart::Chart> {
        use crate::report::chart::{bars_of, Axis};
        let c = &self.body.counters;
        let bars = [
            ("200", c.responses_2xx),
            ("400", c.responses_400),
            ("431", c.responses_431),
            ("501", c.responses_501),
            ("505", c.responses_505),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n as f64, None))
        .collect();
        vec![bars_of(
            "serve-answers",
            "Answers by status",
            "Every request the server answered, by the status it answered with.",
            Axis::Count("requests"),
            bars,
        )]
    }

    fn nothing_to_chart(&self) -> Option<String> {
        (self.body.requests == 0)
            .then(|| "The server answered no request, so there is nothing to chart.".into())
    }

    fn setting(&self) -> Vec<(String, String)> {
        let r = &self.body;
        let mut rows = vec![
            ("listened on".to_string(), r.url.clone()),
            ("backlog".to_string(), r.backlog.to_string()),
            ("body".to_string(), format_bytes(r.body_bytes)),
        ];
        if let Some(t) = r.threads {
            rows.push(("threads".to_string(), t.to_string()));
        }
        rows
    }
}

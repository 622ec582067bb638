//! An HTTP/1.1 load generator, as ab and wrk (and wrk2's open loop) are: the library
//! behind `sockbench load`, and the built-in driver of `sockbench models`.
//!
//! A [`Spec`] says where to connect ([`Target`]: TCP or a Unix socket), what to ask
//! (method, path, `Host`, headers) and how: a number of requests (`-n`, over all
//! connections, as ab's) or a duration, connections at once, keep-alive, requests in
//! flight per connection (pipelining), an open-loop rate, threads and their CPUs.
//! [`run`] drives it with one epoll loop per thread ([`worker`]) and returns the
//! [`LoadReport`]; [`table::grids`] lays that out as ab's summary does.
//!
//! - [`url`]: the `http://` URL; [`request`]: the request bytes, built once;
//! - [`response`]: the incremental response parser;
//! - [`conn`]: one connection; [`worker`]: one thread's loop; [`tally`]: its counts;
//! - [`report`]: the JSON document; [`table`]: the table; [`progress`]: stderr.
//!
//! Not here: the command line (`crate::mode::load`) and any server.
//!
//! # Examples
//! ```no_run
//! use std::time::Duration;
//! use sockbench::load::{run, Spec, Target};
//! let spec = Spec {
//!     target: Target::Tcp("127.0.0.1:8080".parse().unwrap()),
//!     host: "127.0.0.1:8080".into(),
//!     path: "/".into(),
//!     method: "GET".into(),
//!     headers: Vec::new(),
//!     requests: Some(10_000),
//!     duration: None,
//!     connections: 20,
//!     keepalive: true,
//!     pipeline: 1,
//!     rate: None,
//!     threads: 1,
//!     timeout: Duration::from_secs(30),
//!     cpus: Vec::new(),
//! };
//! let report = run(&spec, false)?;
//! println!("{} requests/s", report.body.requests_per_second);
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod conn;
pub mod progress;
pub mod report;
pub mod request;
pub mod table;
pub mod tally;
pub mod url;
pub mod worker;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::{bail, Context as _};
use socket2::SockAddr;

pub use report::{LoadBody, LoadReport};

use tally::Tally;
use worker::{Gate, Shared, Worker};

/// How long a run lasts when neither requests nor a duration is given (as wrk's -d).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// Where the connections go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix stream socket's file.
    Unix(PathBuf),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "tcp {a}"),
            Target::Unix(p) => write!(f, "unix {}", p.display()),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Where to connect.
    pub target: Target,
    /// The `Host` header's value.
    pub host: String,
    /// Path and query of every request.
    pub path: String,
    /// Method of every request.
    pub method: String,
    /// Extra headers (a `Host` among them replaces [`Spec::host`]).
    pub headers: Vec<(String, String)>,
    /// Total requests over all connections; none is sent beyond it.
    pub requests: Option<u64>,
    /// How long to run (with `requests` too, whichever ends first; with neither,
    /// [`DEFAULT_DURATION`]).
    pub duration: Option<Duration>,
    /// Connections at once.
    pub connections: u32,
    /// Keep connections open between requests (without it every request goes on a new
    /// connection with `Connection: close`, as ab without -k).
    pub keepalive: bool,
    /// Requests in flight per connection (more than 1 implies keep-alive).
    pub pipeline: u32,
    /// Open loop: requests per second over all connections, each connection on its own
    /// schedule; latency counts from when each request was due.
    pub rate: Option<f64>,
    /// Generator threads (at most one per connection).
    pub threads: usize,
    /// A connect or a request with no answer after this long fails.
    pub timeout: Duration,
    /// Pin thread i to `cpus[i % len]` (empty: no pinning).
    pub cpus: Vec<usize>,
}

impl Spec {
    /// The URL the requests name: `http://HOST/PATH`.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.host, self.path)
    }

    fn check(&self) -> anyhow::Result<()> {
        if self.connections == 0 {
            bail!("a load needs at least one connection (-c 1 or more)");
        }
        if self.pipeline == 0 {
            bail!("--pipeline must be at least 1 (1: one request at a time)");
        }
        if self.requests == Some(0) {
            bail!("-n must be at least 1");
        }
        if self.duration == Some(Duration::ZERO) {
            bail!("the duration must be more than 0");
        }
        if self.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            bail!("--rate must be a positive number of requests per second");
        }
        if self.timeout.is_zero() {
            bail!("--timeout must be more than 0");
        }
        if !self.path.starts_with('/') {
            bail!("the path must start with '/'");
        }
        Ok(())
    }
}

/// Run the load.
///
/// Interrupted by Ctrl-C ([`crate::interrupt`]) the report holds what was measured, with
/// `interrupted` set. A run in which nothing was answered is a report too, with `error`
/// saying why and what to try; the caller decides the exit status.
///
/// # Errors
/// The spec is inconsistent, or a thread or its epoll instance cannot be made.
pub fn run(spec: &Spec, progress: bool) -> anyhow::Result<LoadReport> {
    let started_at = crate::report::envelope::now();
    spec.check()?;
    let mut spec = spec.clone();
    if spec.requests.is_none() && spec.duration.is_none() {
        spec.duration = Some(DEFAULT_DURATION);
    }
    let spec = &spec;
    let c = spec.connections as usize;
    let threads = spec.threads.clamp(1, c);
    let addr = match &spec.target {
        Target::Tcp(a) => SockAddr::from(*a),
        Target::Unix(p) => SockAddr::unix(p)
            .with_context(|| format!("{} cannot be a Unix socket address", p.display()))?,
    };
    let shared = Shared::new(spec.requests, threads);
    let mut workers = Vec::with_capacity(threads);
    for t in 0..threads {
        let range = (t * c / threads)..((t + 1) * c / threads);
        workers.push(
            Worker::new(spec, &shared, t, addr.clone(), range)
                .context("cannot create an epoll instance")?,
        );
    }
    let gate = Gate::default();
    let display = progress::Progress::new(progress, spec.requests, spec.duration);
    let outcomes = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        for (t, w) in workers.into_iter().enumerate() {
            let cpu = (!spec.cpus.is_empty()).then(|| spec.cpus[t % spec.cpus.len()]);
            let (gate, shared) = (&gate, &shared);
            let spawned = std::thread::Builder::new()
                .name(format!("sb-load-{t}"))
                .spawn_scoped(s, move || {
                    let r = w.run(gate, cpu);
                    if r.is_err() {
                        shared.stop.store(true, Relaxed);
                    }
                    r
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    gate.open(false);
                    return Err(anyhow::Error::new(e).context("cannot start a generator thread"));
                }
            }
        }
        gate.open(true);
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
            display.update(shared.progress.iter().map(|p| p.0.load(Relaxed)).sum());
        }
        display.finish();
        let mut out = Vec::with_capacity(threads);
        for h in handles {
            match h.join() {
                Ok(r) => out.push(r.context("a generator thread failed")?),
                Err(_) => bail!("a generator thread panicked"),
            }
        }
        Ok(out)
    })?;
    let mut all = Tally::new(spec.rate.is_some());
    let mut wall = Duration::ZERO;
    for o in &outcomes {
        all.merge(&o.tally);
        wall = wall.max(o.wall);
    }
    Ok(report::build(
        report::Context {
            spec,
            command: Vec::new(),
            threads,
            wall,
            first_length: shared.first_length(),
            interrupted: crate::interrupt::requested(),
            started_at,
        },
        &all,
    ))
}

//! `sockbench models`: every server model in turn, under the same load, in one table.
//!
//! Each model runs in a child `sockbench serve` (port chosen by the kernel, read from its
//! first stderr line), pinned to one CPU; the load runs pinned to the other: the built-in
//! generator (a child `sockbench load --format json`), or ab, wrk or h2load, whose text
//! output is parsed into the same figures. The server's CPU over the load's run comes
//! from /proc/PID/stat; its own count of answered requests (its JSON summary after
//! SIGTERM) is set beside the driver's, and a disagreement is a warning.
//!
//! `--export-json` and `--export-html` paths are checked before anything runs (exit 2, as
//! for a benchmark's exports); one that cannot be written at the end makes the exit status
//! 1; one given as `-` is what stdout holds, without the table.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cli::ModelsArgs;
use crate::document::models::{ranking, Driver, ModelsBody, ModelsReport, Row};
use crate::document::serve::ServeReport;
use crate::error::{CommandResult, Error, Outcome, PlanError};
use crate::model::ModelKind;
use crate::report::chart::{bar_chart, legend, si_scale, time_unit, Bar, BarSpec, Chart};
use crate::report::grid::{Align, Grid};
use crate::report::output::{self, Head, Rendered};
use crate::report::{Envelope, Kind};
use crate::vocab::units::{format_per_second, parse_size};

/// wrk and h2load without -n run this long.
const DEFAULT_TIMED: Duration = Duration::from_secs(3);

/// What `models` was asked to do, checked.
#[derive(Debug)]
struct Setup {
    models: Vec<ModelKind>,
    driver: Driver,
    requests: Option<u64>,
    duration: Option<Duration>,
    connections: u32,
    keepalive: bool,
    pipeline: u32,
    body_size: u64,
    backlog: u32,
    cpus: Option<(usize, usize)>,
    runs: u32,
}

fn setup(args: &ModelsArgs) -> Result<Setup, PlanError> {
    let models = if args.model.trim() == "all" {
        ModelKind::ALL.to_vec()
    } else {
        let mut v = Vec::new();
        for m in args.model.split(',') {
            let m = ModelKind::parse(m)?;
            if !v.contains(&m) {
                v.push(m);
            }
        }
        v
    };
    let driver = Driver::parse(&args.driver)?;
    let duration = args.duration.parsed()?;
    if duration.is_some_and(|d| d < Duration::from_millis(100)) {
        return Err("--duration must be at least 100ms".into());
    }
    if args.connections == 0 || args.connections > 100_000 {
        return Err("--connections must be between 1 and 100000".into());
    }
    if args.requests == 0 {
        return Err("--requests must be at least 1".into());
    }
    if duration.is_none() && args.requests < u64::from(args.connections) {
        return Err(format!(
            "-n {} is fewer than -c {} connections: give at least one request per connection",
            args.requests, args.connections
        )
        .into());
    }
    if args.pipeline == 0 || args.pipeline > 1024 {
        return Err("--pipeline must be between 1 and 1024".into());
    }
    if args.pipeline > 1 && matches!(driver, Driver::Ab | Driver::Wrk) {
        return Err(format!(
            "{} does not pipeline requests: use --driver builtin or h2load with --pipeline",
            driver.program()
        )
        .into());
    }
    let body_size = parse_size(&args.body_size).map_err(|e| format!("--body-size: {e}"))?;
    if args.backlog == 0 {
        return Err("--backlog must be at least 1".into());
    }
    let cpus = match &args.cpus.cpus {
        Some(list) => {
            list.within(&super::serve::allowed_cpus())?;
            match list.0[..] {
                [s, l] => Some((s, l)),
                _ => {
                    return Err(
                        "--cpus takes two CPUs: the server's and the load's, e.g. 0,1".into(),
                    )
                }
            }
        }
        // The first two CPUs this process may use (a taskset or cpuset may exclude 0).
        None => match super::serve::allowed_cpus()[..] {
            [s, l, ..] => Some((s, l)),
            _ => None,
        },
    };
    Ok(Setup {
        models,
        driver,
        requests: if duration.is_some() || driver == Driver::Wrk {
            None
        } else {
            Some(args.requests)
        },
        // ab, wrk and h2load take whole seconds: the time they really run.
        duration: match (duration, driver) {
            (None, Driver::Wrk) => Some(DEFAULT_TIMED),
            (Some(d), Driver::Builtin) => Some(d),
            (Some(d), _) => Some(Duration::from_secs(d.as_secs_f64().ceil() as u64)),
            (None, _) => None,
        },
        connections: args.connections,
        // wrk and h2load always keep their connections.
        keepalive: args.keepalive
            || args.pipeline > 1
            || matches!(driver, Driver::Wrk | Driver::H2load),
        pipeline: args.pipeline,
        body_size,
        backlog: args.backlog.max(args.connections.min(4096)),
        cpus,
        runs: args.runs.runs,
    })
}

/// Whether `program` is on PATH.
fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Run `sockbench models`.
///
/// # Errors
/// A usage error, or a load driver that is not installed.
pub fn run(args: &ModelsArgs, argv: Vec<String>) -> CommandResult {
    let output = &args.output;
    let setup = setup(args)?;
    let exports = super::exports(output)?;
    if setup.driver != Driver::Builtin && !installed(setup.driver.program()) {
        return Err(Error::failed(format!(
            "{} is not installed: install it (Debian: apt install {}) or use --driver builtin",
            setup.driver.program(),
            setup.driver.package()
        )));
    }
    super::catch_interrupts()?;
    let mut report = run_all(&setup, argv, output.quiet);
    exports.finish(&report);
    // A Ctrl-C while an export waited for a FIFO's reader interrupted the command too.
    report.envelope.interrupted |= crate::interrupt::requested();
    let unwritten = super::emit(&report, output, &exports);
    let failed = report.body.rows.iter().any(|r| r.error.is_some());
    Ok(Outcome::of(report.envelope.interrupted, failed).and_errors(unwritten))
}

fn run_all(setup: &Setup, argv: Vec<String>, quiet: bool) -> ModelsReport {
    let mut report = ModelsReport {
        envelope: Envelope::starting(argv),
        body: ModelsBody {
            driver: setup.driver,
            driver_command: Vec::new(),
            requests: setup.requests,
            duration_seconds: setup.duration.map(|d| d.as_secs_f64()),
            connections: setup.connections,
            keepalive: setup.keepalive,
            pipeline: setup.pipeline,
            body_bytes: setup.body_size,
            backlog: setup.backlog,
            cpus: setup.cpus.map(|(s, l)| [s, l]),
            runs: setup.runs,
            rows: Vec::new(),
            ranking: None,
        },
    };
    if setup.cpus.is_some() && setup.driver != Driver::Builtin && !installed("taskset") {
        report.envelope.warnings.push(format!(
            "taskset (util-linux) is not installed: {} ran unpinned",
            setup.driver.program()
        ));
    }
    for (i, &model) in setup.models.iter().enumerate() {
        if crate::interrupt::requested() {
            report.envelope.interrupted = true;
            break;
        }
        if !quiet {
            eprintln!(
                "sockbench models: [{}/{}] {model} under {}",
                i + 1,
                setup.models.len(),
                setup.driver.program()
            );
        }
        let mut row = Row {
            model: model.name().into(),
            ..Row::default()
        };
        if let Err(why) = model.available() {
            row.skipped = Some(why);
            report.body.rows.push(row);
            continue;
        }
        // Each run with a fresh server; the row is the median run by requests/s.
        let mut runs: Vec<Row> = Vec::new();
        for _ in 0..setup.runs {
            let mut one = row.clone();
            if let Err(e) = run_one(setup, model, &mut one, &mut report) {
                if crate::interrupt::requested() {
                    report.envelope.interrupted = true;
                } else {
                    one.error = Some(format!("{e:#}"));
                }
            }
            if let (Some(server), Some(done)) = (one.server_requests, one.requests_complete) {
                if server < done {
                    report.envelope.warnings.push(format!(
                        "{model}: the server counted {server} answered requests but the driver {done} complete ones"
                    ));
                }
            }
            let stop = one.error.is_some() || report.envelope.interrupted;
            runs.push(one);
            if stop {
                break;
            }
        }
        report.body.rows.push(median_row(row, runs));
    }
    report.body.ranking = ranking(&report.body.rows);
    report.envelope.end();
    report
}

/// A model's row from its runs: a failed run's (the first), else the median run's by
/// requests per second (the lower middle for an even count), with every run's figure.
fn median_row(empty: Row, mut runs: Vec<Row>) -> Row {
    if let Some(failed) = runs.iter().position(|r| r.error.is_some()) {
        return runs.swap_remove(failed);
    }
    let each: Vec<f64> = runs.iter().filter_map(|r| r.requests_per_second).collect();
    runs.sort_by(|a, b| {
        let rps = |r: &Row| r.requests_per_second.unwrap_or(0.0);
        rps(a).total_cmp(&rps(b))
    });
    let mid = runs.len().saturating_sub(1) / 2;
    let mut row = match runs.into_iter().nth(mid) {
        Some(r) => r,
        None => empty,
    };
    row.runs_requests_per_second = each;
    row
}

/// The child server: its process and where it listens.
struct Server {
    child: Child,
    url: String,
    stderr: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(setup: &Setup, model: ModelKind) -> anyhow::Result<Server> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["serve", "--model", model.name(), "--port", "0", "-v", "0"])
        .args(["--backlog", &setup.backlog.to_string()])
        .args(["--body-size", &setup.body_size.to_string()])
        .args(["--format", "json"]);
    if let Some((s, _)) = setup.cpus {
        cmd.args(["--cpus", &s.to_string()]);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = Vec::new();
    let mut server = Server {
        child,
        url: String::new(),
        stderr: rx,
    };
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        // Ctrl-C is seen within 10 ms, however long the server takes to say where it is.
        if crate::interrupt::requested() {
            anyhow::bail!("interrupted while the {model} server started");
        }
        match server
            .stderr
            .recv_timeout(left.min(Duration::from_millis(10)))
        {
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Ok(line) => {
                if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                    server.url = url.to_string();
                    return Ok(server);
                }
                seen.push(line);
            }
            Err(_) => break,
        }
    }
    anyhow::bail!(
        "the {model} server did not start: {}",
        if seen.is_empty() {
            "it said nothing within 5 s".to_string()
        } else {
            seen.join("; ")
        }
    )
}

/// The server's CPU: from its own summary (getrusage, microseconds) when it has one, else
/// the clock-tick difference read from /proc.
fn server_cpu(summary: Option<&ServeReport>, ticks: Option<f64>) -> Option<f64> {
    let own = summary
        .filter(|s| s.envelope.error.is_none())
        .map(|s| s.body.cpu_user_seconds + s.body.cpu_system_seconds)
        .filter(|c| c.is_finite() && *c >= 0.0);
    own.or(ticks)
}

/// User + system CPU of a process so far, from /proc/PID/stat (clock ticks).
fn process_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu(&stat, ticks_per_second())
}

fn ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |t| t as f64)
}

/// utime + stime (fields 14 and 15) of a /proc/PID/stat line, in seconds.
fn parse_stat_cpu(stat: &str, ticks: f64) -> Option<f64> {
    // The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

/// The driver's command line for `url`.
fn driver_command(setup: &Setup, url: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let pin = |v: &mut Vec<String>| {
        if let Some((_, l)) = setup.cpus {
            if installed("taskset") {
                v.extend(["taskset".into(), "-c".into(), l.to_string()]);
            }
        }
    };
    let n = setup.requests.map(|n| n.to_string());
    let secs = setup
        .duration
        .map(|d| format!("{}", d.as_secs_f64().ceil().max(1.0) as u64));
    let c = setup.connections.to_string();
    match setup.driver {
        Driver::Builtin => {
            let exe =
                std::env::current_exe().map_or("sockbench".into(), |p| p.display().to_string());
            v.extend([exe, "load".into(), "-c".into(), c, "-q".into()]);
            v.extend(["--format".into(), "json".into()]);
            match (&n, setup.duration) {
                (Some(n), _) => v.extend(["-n".into(), n.clone()]),
                (None, Some(d)) => v.extend(["-d".into(), format!("{}ms", d.as_millis())]),
                (None, None) => {}
            }
            if setup.keepalive {
                v.push("-k".into());
            }
            if setup.pipeline > 1 {
                v.extend(["--pipeline".into(), setup.pipeline.to_string()]);
            }
            if let Some((_, l)) = setup.cpus {
                v.extend(["--cpus".into(), l.to_string(), "-t".into(), "1".into()]);
            }
        }
        Driver::Ab => {
            pin(&mut v);
            v.extend(["ab".into(), "-q".into(), "-c".into(), c]);
            match (&n, &secs) {
                (Some(n), _) => v.extend(["-n".into(), n.clone()]),
                // ab -t stops at the time or at -n, whichever comes first.
                (None, Some(s)) => {
                    v.extend(["-t".into(), s.clone(), "-n".into(), "100000000".into()])
                }
                (None, None) => {}
            }
            if setup.keepalive {
                v.push("-k".into());
            }
        }
        Driver::Wrk => {
            pin(&mut v);
            v.extend([
                "wrk".into(),
                "--latency".into(),
                "-t".into(),
                "1".into(),
                "-c".into(),
                c,
            ]);
            v.extend([
                "-d".into(),
                format!("{}s", secs.unwrap_or_else(|| "3".into())),
            ]);
        }
        Driver::H2load => {
            pin(&mut v);
            v.extend(["h2load".into(), "--h1".into(), "-c".into(), c]);
            v.extend(["-m".into(), setup.pipeline.to_string()]);
            match (&n, &secs) {
                (Some(n), _) => v.extend(["-n".into(), n.clone()]),
                (None, Some(s)) => v.extend(["-D".into(), s.clone()]),
                (None, None) => {}
            }
        }
    }
    v.push(url.to_string());
    v
}

fn run_one(
    setup: &Setup,
    model: ModelKind,
    row: &mut Row,
    report: &mut ModelsReport,
) -> anyhow::Result<()> {
    let mut server = start_server(setup, model)?;
    let cmd = driver_command(setup, &server.url);
    if report.body.driver_command.is_empty() {
        report.body.driver_command = cmd.clone();
    }
    let pid = server.child.id();
    let cpu0 = process_cpu(pid);
    let started = Instant::now();
    // A driver that runs far past what it was asked (a server that stopped answering)
    // is stopped: timed runs get their time plus 30 s, counted ones 10 minutes.
    let limit = setup
        .duration
        .map_or(Duration::from_secs(600), |d| d + Duration::from_secs(30));
    let out = run_driver(&cmd, limit)?;
    row.driver_seconds = Some(started.elapsed().as_secs_f64());
    let cpu1 = process_cpu(pid);
    let text = String::from_utf8_lossy(&out.stdout);
    let measured = match setup.driver {
        Driver::Builtin => parse_builtin(&text),
        Driver::Ab => parse_ab(&text),
        Driver::Wrk => parse_wrk(&text),
        Driver::H2load => parse_h2load(&text),
    };
    // Stop the server and read its own count.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    // It stops within a tick; one that does not is killed after 5 s (and has no count).
    let stop_by = Instant::now() + Duration::from_secs(5);
    while server.child.try_wait()?.is_none() {
        if Instant::now() >= stop_by {
            let _ = server.child.kill();
            let _ = server.child.wait();
            report.envelope.warnings.push(format!(
                "{model}: the server did not stop within 5 s of SIGTERM and was killed"
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut summary = String::new();
    if let Some(mut so) = server.child.stdout.take() {
        let _ = so.read_to_string(&mut summary);
    }
    let summary: Option<ServeReport> = serde_json::from_str(&summary).ok();
    row.server_requests = (summary.as_ref())
        .filter(|s| s.envelope.error.is_none())
        .map(|s| s.body.requests);
    let Some(m) = measured else {
        if let Some(e) = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| Some(v.get("error")?.as_str()?.to_string()))
        {
            anyhow::bail!("{e}");
        }
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "could not read {}'s output (exit {}): {}",
            setup.driver.program(),
            out.status
                .code()
                .map_or("by a signal".into(), |c| c.to_string()),
            err.lines()
                .chain(text.lines())
                .take(3)
                .collect::<Vec<_>>()
                .join(" / ")
        );
    };
    row.requests_complete = Some(m.complete);
    row.requests_failed = Some(m.failed);
    row.non_2xx = Some(m.non_2xx);
    row.requests_per_second = Some(m.requests_per_second);
    row.p50_ns = m.p50_ns;
    row.p99_ns = m.p99_ns;
    row.mean_ns = m.mean_ns;
    let ticks = cpu0.zip(cpu1).map(|(a, b)| (b - a).max(0.0));
    if let Some(cpu) = server_cpu(summary.as_ref(), ticks) {
        row.server_cpu_seconds = Some(cpu);
        row.server_cpu_seconds_per_request = (m.complete > 0).then(|| cpu / m.complete as f64);
    }
    if m.failed > 0 || m.non_2xx > 0 {
        report.envelope.warnings.push(format!(
            "{model}: {} failed and {} non-2xx requests under {}",
            m.failed,
            m.non_2xx,
            setup.driver.program()
        ));
    }
    Ok(())
}

/// Run the driver to its end, or until Ctrl-C (then it gets SIGINT, as from a terminal,
/// and prints what it measured so far); its output.
fn run_driver(cmd: &[String], limit: Duration) -> anyhow::Result<std::process::Output> {
    let started = Instant::now();
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", cmd[0]))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut signalled: Option<Instant> = None;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if started.elapsed() > limit && signalled.is_none() {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "{} did not finish within {} s: stopped",
                cmd[0],
                limit.as_secs()
            );
        }
        if crate::interrupt::requested() {
            match signalled {
                None => {
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
                    signalled = Some(Instant::now());
                }
                Some(t) if t.elapsed() > Duration::from_secs(2) => {
                    let _ = child.kill();
                }
                Some(_) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Ok(std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// What a driver's output says.
#[derive(Clone, Debug, Default, PartialEq)]
struct Measured {
    complete: u64,
    failed: u64,
    non_2xx: u64,
    requests_per_second: f64,
    p50_ns: Option<u64>,
    p99_ns: Option<u64>,
    mean_ns: Option<u64>,
}

/// `sockbench load --format json`.
fn parse_builtin(text: &str) -> Option<Measured> {
    let doc: serde_json::Value = serde_json::from_str(text).ok()?;
    if doc.get("error").is_some_and(|e| !e.is_null()) {
        return None;
    }
    let v = doc.get("body")?;
    let u = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
    let failed = v.get("requests_failed").map_or(0, |f| match f {
        serde_json::Value::Object(m) => m.values().filter_map(serde_json::Value::as_u64).sum(),
        other => other.as_u64().unwrap_or(0),
    });
    let lat = v.get("latency");
    let l = |k: &str| {
        lat.and_then(|l| l.get(k))
            .and_then(serde_json::Value::as_u64)
    };
    Some(Measured {
        complete: u("requests_complete")?,
        failed,
        non_2xx: u("non_2xx").unwrap_or(0),
        requests_per_second: v.get("requests_per_second")?.as_f64()?,
        p50_ns: l("p50_ns"),
        p99_ns: l("p99_ns"),
        mean_ns: l("mean_ns"),
    })
}

/// The first number after `key` on the line that starts with it.
fn after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(key))
        .and_then(|r| r.split_whitespace().next())
}

/// A wrk or h2load duration: `123.45us`, `1.23ms`, `2.00s`, `1.5m`.
fn parse_time_ns(t: &str) -> Option<u64> {
    let (num, mult) = if let Some(n) = t.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60e9)
    } else {
        return None;
    };
    let v: f64 = num.parse().ok()?;
    Some((v * mult).round() as u64)
}

/// ApacheBench's report.
fn parse_ab(text: &str) -> Option<Measured> {
    let ms = |s: &str| s.parse::<f64>().ok().map(|v| (v * 1e6).round() as u64);
    // "  50%      4": milliseconds, whole; 0 is "under a millisecond", which is no
    // figure at all (null), not zero.
    let pct = |p: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(p))
            .and_then(|r| r.split_whitespace().next())
            .and_then(ms)
            .filter(|&ns| ns > 0)
    };
    let mean_ms = text
        .lines()
        .find(|l| {
            l.starts_with("Time per request:") && l.contains("(mean)") && !l.contains("across")
        })
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(ms);
    Some(Measured {
        complete: after(text, "Complete requests:")?.parse().ok()?,
        failed: after(text, "Failed requests:")?.parse().ok()?,
        non_2xx: after(text, "Non-2xx responses:")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        requests_per_second: after(text, "Requests per second:")?.parse().ok()?,
        p50_ns: pct("50%"),
        p99_ns: pct("99%"),
        mean_ns: mean_ms,
    })
}

/// wrk's report (with --latency).
fn parse_wrk(text: &str) -> Option<Measured> {
    let complete: u64 = text
        .lines()
        .find(|l| l.contains(" requests in "))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let errors: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Socket errors:"))
        .map_or(0, |r| {
            r.split(',')
                .filter_map(|p| p.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum()
        });
    let pct = |p: &str| after(text, p).and_then(parse_time_ns);
    let mean = text
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("Latency"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(parse_time_ns);
    Some(Measured {
        complete,
        failed: errors,
        non_2xx: after(text, "Non-2xx or 3xx responses:")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        requests_per_second: after(text, "Requests/sec:")?.parse().ok()?,
        p50_ns: pct("50%"),
        p99_ns: pct("99%"),
        mean_ns: mean,
    })
}

/// h2load's report: counts and req/s; no percentiles (it prints min, max, mean, sd).
fn parse_h2load(text: &str) -> Option<Measured> {
    let reqs = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("requests:"))?;
    let field = |name: &str| {
        reqs.split(',')
            .map(str::trim)
            .find(|p| p.ends_with(name))
            .and_then(|p| p.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    let codes = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("status codes:"));
    let non_2xx = codes.map_or(0, |c| {
        c.split(',')
            .map(str::trim)
            .filter(|p| !p.ends_with("2xx"))
            .filter_map(|p| p.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    });
    let rps = text
        .lines()
        .find(|l| l.starts_with("finished in"))?
        .split(',')
        .find(|p| p.contains("req/s"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let mean = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("time for request:"))
        .and_then(|r| r.split_whitespace().nth(2))
        .and_then(parse_time_ns);
    Some(Measured {
        complete: field("succeeded")?,
        // h2load's `failed` counts non-2xx answers too, and `errored` its timeouts:
        // what failed without an answer is `errored` alone.
        failed: field("errored").unwrap_or(0),
        non_2xx,
        requests_per_second: rps,
        p50_ns: None,
        p99_ns: None,
        mean_ns: mean,
    })
}

fn us(ns: Option<u64>) -> String {
    ns.map_or("-".into(), |n| format!("{:.1} µs", n as f64 / 1e3))
}

/// The D benchmark's summary table, with latency and CPU beside requests/s; a skipped
/// or failed model's row says why; the rankings and warnings under it.
fn grid(report: &ModelsReport) -> Grid {
    let r = &report.body;
    let load = match (r.requests, r.duration_seconds) {
        (Some(n), _) => format!("{n} requests"),
        (None, Some(d)) => format!("{d} s"),
        (None, None) => String::new(),
    };
    let title = format!(
        "{} over {} connections{}{}, {} B bodies, driven by {}{}",
        load,
        r.connections,
        if r.keepalive {
            ", keep-alive"
        } else {
            ", a connection per request"
        },
        if r.pipeline > 1 {
            format!(", {} pipelined", r.pipeline)
        } else {
            String::new()
        },
        r.body_bytes,
        match r.driver {
            Driver::Builtin => "sockbench load",
            Driver::Ab => "ab",
            Driver::Wrk => "wrk",
            Driver::H2load => "h2load --h1",
        },
        r.cpus.map_or(String::new(), |[s, l]| format!(
            "; server on CPU {s}, load on CPU {l}"
        )),
    );
    let headers = [
        "model",
        "requests/s",
        "runs min-max",
        "p50",
        "p99",
        "server CPU/request",
        "failed",
        "server count",
    ];
    let mut rows = Vec::new();
    for row in &r.rows {
        if let Some(why) = row.skipped.as_ref().or(row.error.as_ref()) {
            let what = if row.skipped.is_some() {
                "skipped"
            } else {
                "failed"
            };
            let mut cells = vec![row.model.clone(), format!("{what}: {why}")];
            cells.resize(headers.len(), "-".into());
            rows.push(cells);
            continue;
        }
        rows.push(vec![
            row.model.clone(),
            row.requests_per_second
                .map_or("-".into(), |v| format!("{v:.0}")),
            crate::measure::ranking::spread_cell(&row.runs_requests_per_second, &|v| {
                format!("{v:.0}")
            }),
            us(row.p50_ns),
            us(row.p99_ns),
            row.server_cpu_seconds_per_request
                .map_or("-".into(), |s| format!("{:.1} µs", s * 1e6)),
            format!(
                "{}{}",
                row.requests_failed.unwrap_or(0),
                match row.non_2xx {
                    Some(n) if n > 0 => format!(" (+{n} non-2xx)"),
                    _ => String::new(),
                }
            ),
            row.server_requests.map_or("-".into(), |n| n.to_string()),
        ]);
    }
    let mut notes = Vec::new();
    if r.driver == Driver::H2load {
        notes.push("note: h2load reports no latency percentiles (mean in the JSON)".to_string());
    }
    let show = |v: f64| format_per_second(v).replace("/s", " requests/s");
    for line in crate::measure::ranking::summaries(r.ranking.as_slice(), &show) {
        notes.push(format!("ranking: {line}"));
    }
    for w in &report.envelope.warnings {
        notes.push(format!("warning: {w}"));
    }
    if report.envelope.interrupted {
        notes.push("interrupted: the table covers the models that ran before Ctrl-C".into());
    }
    let mut align = vec![Align::Right; headers.len()];
    align[0] = Align::Left;
    Grid {
        title: Some(title),
        headers: headers.map(String::from).to_vec(),
        align,
        rows,
        notes,
    }
}

impl Rendered for ModelsReport {
    fn head(&self) -> Head<'_> {
        Head::of(Kind::Models, &self.envelope)
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        output::pretty(&self.document())
    }

    fn tables(&self, _view: &crate::vocab::View) -> Vec<Grid> {
        vec![grid(self)]
    }

    fn charts(&self) -> Vec<crate::report::chart::Chart> {
        models_charts(&self.body.rows)
    }

    fn records(&self) -> output::Records {
        let rows: Vec<serde_json::Value> = (self.body.rows.iter())
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .collect();
        output::records_of(
            &rows,
            &serde_json::to_value(Row::default()).unwrap_or_default(),
        )
    }

    fn metrics(&self) -> Vec<crate::report::openmetrics::Family> {
        let rows: Vec<_> = (self.body.rows.iter())
            .filter(|r| r.error.is_none() && r.skipped.is_none())
            .map(|r| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.remove("model");
                }
                (vec![("model", r.model.clone())], v)
            })
            .collect();
        output::gauges(Kind::Models, "A server model", &rows)
    }

    fn count(&self) -> String {
        output::counted(self.body.rows.len(), "model")
    }

    fn nothing_to_chart(&self) -> Option<String> {
        self.body
            .rows
            .iter()
            .all(|r| r.requests_per_second.is_none())
            .then(|| "No model was measured, so there is nothing to chart.".to_string())
    }

    fn findings(&self) -> Vec<output::Finding> {
        (self.body.rows.iter())
            .filter_map(|r| {
                Some(output::Finding {
                    severity: output::Severity::Failure,
                    about: r.model.clone(),
                    text: format!(" failed: {}", r.error.as_ref()?),
                })
            })
            .collect()
    }

    fn setting(&self) -> Vec<(String, String)> {
        let r = &self.body;
        let mut rows = vec![
            ("driver".to_string(), r.driver.program().to_string()),
            ("backlog".to_string(), r.backlog.to_string()),
        ];
        if let Some([s, l]) = r.cpus {
            rows.push(("CPUs".to_string(), format!("server {s}, load {l}")));
        }
        rows
    }

    fn title(&self) -> String {
        "sockbench models report".into()
    }
}

/// The charts of a `sockbench models` document: requests per second per server model,
/// then its median and 99th-percentile latency side by side. A model that was skipped
/// or failed is named in the captions, never drawn as zero.
fn models_charts(rows: &[Row]) -> Vec<Chart> {
    let ran: Vec<&Row> = rows
        .iter()
        .filter(|r| r.skipped.is_none() && r.error.is_none())
        .collect();
    let left: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let why = match (&r.skipped, &r.error) {
                (Some(_), _) => "skipped",
                (None, Some(_)) => "failed",
                (None, None) => return None,
            };
            Some(format!("{} ({why})", r.model))
        })
        .collect();
    let left = if left.is_empty() {
        String::new()
    } else {
        format!(" Not plotted: {}.", left.join(", "))
    };
    let max = ran
        .iter()
        .filter_map(|r| r.requests_per_second)
        .fold(0.0, f64::max);
    let (unit, prefix) = si_scale(max);
    let rate: Vec<Bar> = ran
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            Some(Bar {
                label: r.model.clone(),
                value: r.requests_per_second? / unit,
                whisker: None,
                colour: i,
            })
        })
        .collect();
    let mut out = vec![bar_chart(BarSpec {
        id: "models-rate".into(),
        title: "Requests per second by server model".into(),
        caption: format!(
            "Requests the driver completed per second, one run per model (SI: 1 k/s =              1000/s).{left}"
        ),
        x_desc: format!(
            "requests per second ({}requests/s)",
            if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix} ")
            }
        ),
        bars: rate,
    })];
    let max_ns = ran
        .iter()
        .filter_map(|r| r.p99_ns.or(r.p50_ns))
        .fold(0, u64::max) as f64;
    let (tunit, sym) = time_unit(max_ns);
    let mut latency = Vec::new();
    for r in &ran {
        for (k, (name, v)) in [("p50", r.p50_ns), ("p99", r.p99_ns)]
            .into_iter()
            .enumerate()
        {
            if let Some(ns) = v {
                latency.push(Bar {
                    label: format!("{} {name}", r.model),
                    value: ns as f64 / tunit,
                    whisker: None,
                    colour: k,
                });
            }
        }
    }
    let mut chart = bar_chart(BarSpec {
        id: "models-latency".into(),
        title: "Latency by server model".into(),
        caption: format!(
            "Median (p50) and 99th-percentile (p99) request latency as the driver measured it              (a driver that does not report them, as h2load, leaves them out).{left}"
        ),
        x_desc: format!("latency ({sym})"),
        bars: latency,
    });
    if !chart.svg.is_empty() {
        chart.legend = legend(["p50".to_string(), "p99".to_string()].into_iter());
    }
    out.push(chart);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Format;

    /// A model's row is its median run with every run's figure; a failed run is the row;
    /// from single runs the ranking names no model (issue 29).
    #[test]
    fn models_get_requests_per_second_and_latency_bars_without_the_skipped() {
        let row = |model: &str, rps: f64, p50: u64| Row {
            model: model.into(),
            requests_per_second: Some(rps),
            p50_ns: Some(p50),
            p99_ns: Some(p50 * 4),
            ..Row::default()
        };
        let mut rows = vec![
            row("thread", 20_000.0, 50_000),
            row("epoll", 40_000.0, 25_000),
        ];
        rows.push(Row {
            model: "io-uring".into(),
            skipped: Some("no io_uring here".into()),
            ..Row::default()
        });
        let charts = models_charts(&rows);
        let ids: Vec<&str> = charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["models-rate", "models-latency"]);
        let rate = &charts[0].svg;
        assert!(rate.contains("requests per second (k requests/s)"));
        assert!(rate.contains("\nepoll\n"));
        assert!(!rate.contains("io-uring"), "a skipped model is not drawn");
        assert!(charts[0]
            .caption
            .contains("Not plotted: io-uring (skipped)."));
        let latency = &charts[1];
        assert!(latency.svg.contains("latency (µs)"));
        assert!(latency.svg.contains("\nthread p99\n"));
        assert_eq!(latency.svg.matches("<rect").count(), 4);
        assert_eq!(latency.legend.len(), 2);
    }

    #[test]
    fn a_row_is_the_median_run_and_single_runs_rank_nothing() {
        let run = |rps: f64| Row {
            model: "epoll".into(),
            requests_per_second: Some(rps),
            p50_ns: Some(rps as u64),
            ..Row::default()
        };
        let row = median_row(Row::default(), vec![run(3.0), run(1.0), run(2.0)]);
        assert_eq!((row.requests_per_second, row.p50_ns), (Some(2.0), Some(2)));
        assert_eq!(row.runs_requests_per_second, [3.0, 1.0, 2.0]);
        let mut bad = run(5.0);
        bad.error = Some("boom".into());
        let row = median_row(Row::default(), vec![run(3.0), bad]);
        assert_eq!(row.error.as_deref(), Some("boom"));
        let one = |m: &str, rps: f64| Row {
            model: m.into(),
            runs_requests_per_second: vec![rps],
            ..run(rps)
        };
        let r = ranking(&[one("epoll", 100.0), one("thread", 400.0)]).unwrap();
        assert_eq!(r.winner, None);
        assert_eq!(r.outcome, crate::measure::ranking::Outcome::SingleRun);
        let mut text = Vec::new();
        let report = ModelsReport {
            envelope: Envelope::starting(Vec::new()),
            body: ModelsBody {
                driver: Driver::Builtin,
                driver_command: Vec::new(),
                requests: Some(10),
                duration_seconds: None,
                connections: 1,
                keepalive: false,
                pipeline: 1,
                body_bytes: 13,
                backlog: 10,
                cpus: None,
                runs: 1,
                rows: vec![one("epoll", 100.0), one("thread", 400.0)],
                ranking: Some(r),
            },
        };
        text.extend(
            crate::report::exporter(Format::Table, Default::default())
                .serialize(&report)
                .unwrap(),
        );
        let text = String::from_utf8(text).unwrap();
        assert!(!text.contains("fastest: "), "{text}");
        assert!(text.contains("no model is ranked fastest"), "{text}");
    }

    #[test]
    fn the_servers_cpu_is_its_own_microsecond_count_not_clock_ticks() {
        // The server's summary: 0.123456 s of CPU to the microsecond, where /proc's
        // ticks read 0.12 (10 ms steps, which made 20.0, 22.0, 24.0 us per request).
        let summary = |user: f64, system: f64, error: Option<&str>| {
            let mut envelope = crate::report::Envelope::starting(vec!["sockbench".into()]);
            envelope.error = error.map(String::from);
            ServeReport {
                envelope,
                body: crate::document::serve::ServeBody {
                    cpu_user_seconds: user,
                    cpu_system_seconds: system,
                    ..crate::document::serve::ServeBody::default()
                },
            }
        };
        let cpu = server_cpu(Some(&summary(0.100123, 0.023333, None)), Some(0.12)).unwrap();
        assert!((cpu - 0.123456).abs() < 1e-12, "{cpu}");
        // No summary (a server killed at the stop), or a failed server's: ticks.
        assert_eq!(server_cpu(None, Some(0.12)), Some(0.12));
        let failed = summary(0.0, 0.0, Some("cannot listen"));
        assert_eq!(server_cpu(Some(&failed), Some(0.12)), Some(0.12));
        assert_eq!(server_cpu(Some(&summary(-1.0, 0.0, None)), None), None);
        // What a server writes is what models reads back.
        let text = serde_json::to_string(&summary(0.5, 0.25, None).document()).unwrap();
        let back: ServeReport = serde_json::from_str(&text).unwrap();
        assert_eq!(server_cpu(Some(&back), None), Some(0.75));
    }

    #[test]
    fn stat_cpu_is_read_after_the_command_name() {
        let stat = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat_cpu(stat, 100.0), Some(3.0));
        assert_eq!(parse_stat_cpu("garbage", 100.0), None);
    }

    #[test]
    fn times_in_wrk_units() {
        assert_eq!(parse_time_ns("123.45us"), Some(123_450));
        assert_eq!(parse_time_ns("1.50ms"), Some(1_500_000));
        assert_eq!(parse_time_ns("2.00s"), Some(2_000_000_000));
        assert_eq!(parse_time_ns("1.00m"), Some(60_000_000_000));
        assert_eq!(parse_time_ns("12"), None);
    }

    /// Real outputs (ab 2.3, wrk 4.1, h2load 1.52 against `sockbench serve`).
    const AB: &str = r#"This is ApacheBench, Version 2.3 <$Revision$>
Copyright 1996 Adam Twiss, Zeus Technology Ltd, http://www.zeustech.net/
Licensed to The Apache Software Foundation, http://www.apache.org/

Benchmarking 127.0.0.1 (be patient).....done

Server Software:        sockbench
Server Hostname:        127.0.0.1
Server Port:            41295

Document Path:          /
Document Length:        13 bytes

Concurrency Level:      5
Time taken for tests:   0.008 seconds
Complete requests:      200
Failed requests:        0
Keep-Alive requests:    200
Total transferred:      31600 bytes
HTML transferred:       2600 bytes
Requests per second:    23866.35 [#/sec] (mean)
Time per request:       0.209 [ms] (mean)
Time per request:       0.042 [ms] (mean, across all concurrent requests)
Transfer rate:          3682.50 [Kbytes/sec] received

Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:        0    0   0.1      0       1
Processing:     0    0   0.4      0       2
Waiting:        0    0   0.4      0       2
Total:          0    0   0.4      0       2

Percentage of the requests served within a certain time (ms)
  50%      0
  66%      0
  75%      0
  80%      0
  90%      1
  95%      1
  98%      2
  99%      2
 100%      2 (longest request)
"#;
    const WRK: &str = r#"Running 1s test @ http://127.0.0.1:41295/
  1 threads and 5 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    94.07us  274.48us   4.25ms   97.59%
    Req/Sec    75.89k    20.64k  106.65k    72.73%
  Latency Distribution
     50%   47.00us
     75%   81.00us
     90%  101.00us
     99%    1.55ms
  83017 requests in 1.10s, 10.61MB read
Requests/sec:  75530.22
Transfer/sec:      9.65MB
"#;
    const H2LOAD: &str = r#"starting benchmark...
spawning thread #0: 5 total client(s). 200 total requests
Application protocol: http/1.1
progress: 10% done
progress: 20% done
progress: 30% done
progress: 40% done
progress: 50% done
progress: 60% done
progress: 70% done
progress: 80% done
progress: 90% done
progress: 100% done

finished in 1.46ms, 137268.36 req/s, 17.54MB/s
requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 200 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 26.17KB (26800) total, 16.80KB (17200) headers (space savings 0.00%), 2.54KB (2600) data
                     min         max         mean         sd        +/- sd
time for request:       51us       172us        94us        21us    80.00%
time for connect:       51us       345us       180us       114us    60.00%
time to 1st byte:      195us       517us       328us       127us    60.00%
req/s           :   30646.97    39627.97    35299.52     3468.79    60.00%
"#;

    #[test]
    fn ab_output_is_read() {
        let m = parse_ab(AB).unwrap();
        assert_eq!((m.complete, m.failed, m.non_2xx), (200, 0, 0));
        assert_eq!(m.requests_per_second, 23866.35);
        // ab prints whole milliseconds.
        assert_eq!((m.p50_ns, m.p99_ns), (None, Some(2_000_000)));
        assert_eq!(m.mean_ns, Some(209_000));
        let failing = AB
            .replace("Failed requests:        0", "Failed requests:        7")
            .replace(
                "Keep-Alive requests",
                "Non-2xx responses:      3\nKeep-Alive requests",
            );
        let m = parse_ab(&failing).unwrap();
        assert_eq!((m.failed, m.non_2xx), (7, 3));
        assert!(parse_ab("apr_socket_recv: Connection refused (111)").is_none());
    }

    #[test]
    fn wrk_output_is_read() {
        let m = parse_wrk(WRK).unwrap();
        assert_eq!((m.complete, m.failed, m.non_2xx), (83017, 0, 0));
        assert_eq!(m.requests_per_second, 75530.22);
        assert_eq!(
            (m.p50_ns, m.p99_ns, m.mean_ns),
            (Some(47_000), Some(1_550_000), Some(94_070))
        );
        let failing = WRK.replace(
            "Requests/sec",
            "  Socket errors: connect 1, read 2, write 3, timeout 4\n  Non-2xx or 3xx responses: 5\nRequests/sec",
        );
        let m = parse_wrk(&failing).unwrap();
        assert_eq!((m.failed, m.non_2xx), (10, 5));
        assert!(parse_wrk("unable to connect to 127.0.0.1:1 Connection refused").is_none());
    }

    #[test]
    fn h2load_output_is_read() {
        let m = parse_h2load(H2LOAD).unwrap();
        assert_eq!((m.complete, m.failed, m.non_2xx), (200, 0, 0));
        assert_eq!(m.requests_per_second, 137268.36);
        assert_eq!((m.p50_ns, m.p99_ns, m.mean_ns), (None, None, Some(94_000)));
        let failing = H2LOAD
            .replace(
                "200 succeeded, 0 failed, 0 errored, 0 timeout",
                "190 succeeded, 4 failed, 5 errored, 1 timeout",
            )
            .replace(
                "200 2xx, 0 3xx, 0 4xx, 0 5xx",
                "190 2xx, 0 3xx, 6 4xx, 4 5xx",
            );
        let m = parse_h2load(&failing).unwrap();
        assert_eq!((m.complete, m.failed, m.non_2xx), (190, 5, 10));
    }

    #[test]
    fn builtin_output_is_read() {
        let text = r#"{"error": null, "kind": "load", "body": {"requests_complete": 100, "requests_failed": {"connect": 1, "read": 2, "status": 0, "length": 3},
            "non_2xx": 4, "requests_per_second": 1234.5, "latency": {"p50_ns": 10, "p99_ns": 20, "mean_ns": 12}}}"#;
        let m = parse_builtin(text).unwrap();
        assert_eq!((m.complete, m.failed, m.non_2xx), (100, 6, 4));
        assert_eq!(
            (m.p50_ns, m.p99_ns, m.mean_ns),
            (Some(10), Some(20), Some(12))
        );
        assert!(parse_builtin("{}").is_none());
        let failed = text.replace("\"error\": null", "\"error\": \"nothing answered\"");
        assert!(parse_builtin(&failed).is_none());
    }
}

//! The coordinator of a mesh: find the agents, check each answers, run the rounds, and
//! collect each test's outcome from the agent that drove it.
//!
//! Each test is one control connection to its source agent: handshake (with the key),
//! [`DriveMsg`], then the agent's [`DriveReport`] within the test's time plus the
//! `--timeout`. A test that fails makes the coordinator check both agents again; one that
//! no longer answers is marked down with the reason, and every later test it is part of
//! fails at once with that reason instead of waiting on it. Ctrl-C stops launching tests;
//! the tests under way are abandoned and marked interrupted.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context};
use serde::Deserialize;

use super::schedule::{pair_set, rounds, Pairs};
use super::{Figures, Host, Outcome, PairTest};
use crate::control::auth::Key;
use crate::control::client::dial;
use crate::control::frame::FrameType;
use crate::control::messages::HostMeta;
use crate::control::messages::{Bye, DriveMsg, DriveReport};
use crate::control::{Control, ControlError};
use crate::measure::histogram::Bucket;
use crate::measure::latency::LatencyKind;

/// Most pairs under test at once (a round of more waits for a free worker; with
/// `--concurrent`, "every pair at once" means this many): each holds a thread and a
/// control connection.
pub const MAX_AT_ONCE: usize = 256;

/// What a mesh runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The agents: a name for people and `HOST:PORT` to dial.
    pub hosts: Vec<(String, String)>,
    /// The tests of each ordered pair, in order.
    pub tests: Vec<String>,
    /// Seconds each test measures.
    pub duration_s: f64,
    /// Seconds of warm-up before each.
    pub warmup_s: f64,
    /// Streams of tcp-stream.
    pub parallel: u32,
    /// Message size (None: each test's own).
    pub size: Option<u64>,
    /// Which pairs.
    pub pairs: Pairs,
    /// Seed of `Pairs::Random`.
    pub seed: u64,
    /// Every pair at once.
    pub concurrent: bool,
    /// Extra time an agent gets beyond a test's own.
    pub timeout: Duration,
    /// No progress on stderr.
    pub quiet: bool,
}

/// What a mesh gave.
#[derive(Debug)]
pub struct Outcomes {
    /// The agents, with what they said of themselves or why they could not take part.
    pub hosts: Vec<Host>,
    /// Every test of every ordered pair that was due, in the order they ended.
    pub tests: Vec<PairTest>,
    /// Rounds laid out.
    pub rounds: usize,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The agents a host list names: `HOST`, `HOST:PORT` or `[V6]:PORT`, with `port` where
/// none is given, as (name, address to dial).
///
/// # Errors
/// An empty or malformed entry, or fewer than two agents, for the user.
pub fn parse_hosts(entries: &[String], port: u16) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for e in entries.iter().map(|e| e.trim()) {
        if e.is_empty() {
            continue;
        }
        if e.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "host '{e}': a host is HOST, HOST:PORT or [IPV6]:PORT"
            ));
        }
        let addr = if e.parse::<std::net::Ipv6Addr>().is_ok() {
            format!("[{e}]:{port}")
        } else if e.starts_with('[') {
            match e.rsplit_once("]:") {
                Some((_, p)) if p.parse::<u16>().is_ok() => e.to_string(),
                _ if e.ends_with(']') => format!("{e}:{port}"),
                _ => return Err(format!("host '{e}': a bad port (give [IPV6]:PORT)")),
            }
        } else {
            match e.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => e.to_string(),
                Some(_) => {
                    return Err(format!(
                        "host '{e}': a bad port (give HOST:PORT, PORT 1-65535)"
                    ))
                }
                None => format!("{e}:{port}"),
            }
        };
        if out.iter().any(|(_, a)| *a == addr) {
            return Err(format!("host '{e}' is given twice"));
        }
        out.push((e.to_string(), addr));
    }
    Ok(out)
}

/// Every address and port `address` (`HOST:PORT`, `[V6]:PORT`) resolves to, an
/// IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) read as the IPv4 one; none when it does
/// not resolve.
pub fn resolve(address: &str) -> Vec<SocketAddr> {
    let mut addrs: Vec<SocketAddr> = address
        .to_socket_addrs()
        .map(|a| a.map(canonical).collect())
        .unwrap_or_default();
    addrs.sort();
    addrs.dedup();
    addrs
}

/// `a` with an IPv4-mapped IPv6 address as the IPv4 address it maps.
fn canonical(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => a,
        },
        SocketAddr::V4(_) => a,
    }
}

/// The agents with every host in them once. Two entries are the same agent when they
/// resolve (with `resolve`, see [`resolve`]) to an address and port in common, so
/// `127.0.0.1`, `localhost` and `::ffff:127.0.0.1` are one: the first spelling stays and
/// the note returned with the list names each one left out and the address they share.
/// An entry that does not resolve stays (its check says why it cannot take part).
pub fn dedupe_hosts(
    hosts: Vec<(String, String)>,
    resolve: impl Fn(&str) -> Vec<SocketAddr>,
) -> (Vec<(String, String)>, Vec<String>) {
    // Each agent kept, with every address its entries resolved to.
    let mut kept: Vec<((String, String), Vec<SocketAddr>)> = Vec::with_capacity(hosts.len());
    let mut notes = Vec::new();
    for (name, address) in hosts {
        let addrs = resolve(&address);
        let same = kept.iter_mut().find_map(|(k, known)| {
            let shared = addrs.iter().find(|a| known.contains(a))?;
            Some((k, known, *shared))
        });
        match same {
            Some((k, known, shared)) => {
                notes.push(format!(
                    "{address} is the same agent as {} (both reach {shared}): it is in the mesh once, as {}",
                    k.1, k.0
                ));
                known.extend(addrs);
            }
            None => kept.push(((name, address), addrs)),
        }
    }
    (kept.into_iter().map(|(h, _)| h).collect(), notes)
}

/// The lines of a hosts file: one agent per line, `#` starts a comment.
pub fn hosts_file_entries(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Every address `name` resolves to, at `port` (a headless Service: one per pod), sorted
/// so the order is the same on every run.
///
/// # Errors
/// The name does not resolve.
pub fn hosts_from_dns(name: &str, port: u16) -> Result<Vec<(String, String)>, String> {
    let mut addrs: Vec<SocketAddr> = (name, port)
        .to_socket_addrs()
        .map_err(|e| format!("--hosts-from-dns {name}: {e}"))?
        .collect();
    // A dual-stack name gives each agent twice, once per family: keep IPv4 when there
    // is any, so no agent is in the mesh twice.
    if addrs.iter().any(SocketAddr::is_ipv4) {
        addrs.retain(SocketAddr::is_ipv4);
    }
    addrs.sort();
    addrs.dedup();
    Ok(addrs
        .into_iter()
        .map(|a| (a.ip().to_string(), a.to_string()))
        .collect())
}

/// What the mesh reads of a client's JSON report: its first result's figures, typed.
/// The report is a document (results in its body); an agent of the version before the
/// one document sends the results at the top level.
#[derive(Deserialize)]
struct ClientReport {
    #[serde(default)]
    body: Option<ClientResults>,
    #[serde(default)]
    results: Vec<ClientResult>,
}

#[derive(Deserialize)]
struct ClientResults {
    #[serde(default)]
    results: Vec<ClientResult>,
}

/// The figures of one result the mesh reads (the rest of a result is the client's).
#[derive(Deserialize)]
struct ClientResult {
    #[serde(default)]
    bits_per_second: Option<f64>,
    #[serde(default)]
    messages_per_second: Option<f64>,
    #[serde(default)]
    delivered_fraction: Option<f64>,
    #[serde(default)]
    requests_lost: Option<f64>,
    #[serde(default)]
    messages_sent: Option<f64>,
    #[serde(default)]
    latencies: BTreeMap<LatencyKind, ClientLatency>,
    #[serde(default)]
    latency_buckets: BTreeMap<LatencyKind, Vec<Bucket>>,
}

/// The percentiles of a latency the mesh shows.
#[derive(Deserialize)]
struct ClientLatency {
    #[serde(default)]
    p50_ns: Option<f64>,
    #[serde(default)]
    p99_ns: Option<f64>,
}

/// The figures of a client's JSON report.
///
/// # Errors
/// A report that does not parse as one, without a result, or with a figure that is
/// negative, not finite or beyond what a measurement gives.
pub fn figures(report: &serde_json::Value) -> Result<Figures, String> {
    use crate::vocab::units::plausible;
    let parsed = ClientReport::deserialize(report).map_err(|e| {
        let said = crate::control::wire::clean(&e.to_string(), 120);
        format!("the client's report does not parse: {said}")
    })?;
    let r = match parsed.body {
        Some(body) => body.results,
        None => parsed.results,
    }
    .into_iter()
    .next()
    .ok_or("the client's report has no result")?;
    // A figure must be a number a measurement could give: an agent that reports 1e300
    // bit/s has measured nothing.
    let within = |v: Option<f64>, most: f64| -> Result<Option<f64>, String> {
        match v {
            // In exponent form: 1e300 as digits would be 301 of them.
            Some(x) if !(x.is_finite() && x >= 0.0 && x <= most) => Err(format!(
                "the client's report has a figure out of range: {x:e}"
            )),
            v => Ok(v),
        }
    };
    let num = |v: Option<f64>| within(v, f64::MAX);
    let rt = r.latencies.get(&LatencyKind::RoundTrip);
    let as_ns = |x: Option<f64>| x.map(|v| v.round() as u64);
    let delivered = num(r.delivered_fraction)?;
    if delivered.is_some_and(|d| d > 1.0) {
        return Err("the client's report has a delivered fraction above 1".into());
    }
    // Loss from source to destination: on a pingpong the requests lost (its delivered
    // fraction also counts replies lost on the way back, and late ones); on a rate run
    // the messages lost.
    let loss = match (num(r.requests_lost)?, num(r.messages_sent)?) {
        (Some(lost), Some(sent)) if sent > 0.0 => Some((lost / sent).min(1.0)),
        (Some(_), _) => Some(0.0),
        _ => delivered.map(|d| 1.0 - d),
    };
    let buckets = (r.latency_buckets.get(&LatencyKind::RoundTrip))
        .cloned()
        .unwrap_or_default();
    // Counts that no test could make (summed, they would saturate the merged figure).
    let counted = buckets
        .iter()
        .try_fold(0u64, |a, b| a.checked_add(b.count))
        .filter(|&n| n <= plausible::COUNT);
    if counted.is_none()
        || buckets
            .iter()
            .any(|b| b.le_ns as f64 > plausible::LATENCY_NS)
    {
        return Err("the client's round-trip buckets are out of range".into());
    }
    Ok(Figures {
        bits_per_second: within(r.bits_per_second, plausible::BITS_PER_SECOND)?,
        messages_per_second: within(r.messages_per_second, plausible::PER_SECOND)?,
        round_trip_p50_ns: as_ns(within(rt.and_then(|l| l.p50_ns), plausible::LATENCY_NS)?),
        round_trip_p99_ns: as_ns(within(rt.and_then(|l| l.p99_ns), plausible::LATENCY_NS)?),
        loss,
        round_trip_buckets: buckets,
    })
}

/// Dial an agent and say goodbye: whether it answers, and if not, why.
fn probe(address: &str, key: Option<&Key>) -> Result<(), String> {
    let (mut ctl, _) = dial(address, key).map_err(|e| format!("{e:#}"))?;
    let _ = ctl.send(FrameType::Bye, &Bye {});
    Ok(())
}

/// One test on its source agent: its report, or why there is none.
fn drive(
    address: &str,
    key: Option<&Key>,
    msg: &DriveMsg,
    wait: Duration,
) -> anyhow::Result<DriveReport> {
    let (mut ctl, _) = dial(address, key)?;
    ctl.send(FrameType::Drive, msg)?;
    let report = wait_report(&mut ctl, wait)?;
    let _ = ctl.send(FrameType::Bye, &Bye {});
    Ok(report)
}

/// The agent's report, waiting at most `wait` (in short steps, so Ctrl-C is seen).
fn wait_report(ctl: &mut Control, wait: Duration) -> anyhow::Result<DriveReport> {
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(anyhow!(
                "the agent sent no report within {:.0} s",
                wait.as_secs_f64()
            ));
        }
        // A report already here is taken even after Ctrl-C: that test is over.
        match ctl.poll(left.min(Duration::from_millis(10))) {
            Ok(None) if crate::interrupt::requested() => {
                return Err(anyhow!("interrupted (Ctrl-C)"))
            }
            Ok(Some(f)) => {
                let r: DriveReport =
                    crate::control::parse(&f, FrameType::Report).map_err(|e| match e {
                        ControlError::Refused(why) => anyhow!("the agent refused: {why}"),
                        e => anyhow!(e),
                    })?;
                if r.ended_unix_ns < r.started_unix_ns {
                    return Err(anyhow!("the agent's report ends before it starts"));
                }
                return Ok(r);
            }
            Ok(None) => {}
            Err(e) => return Err(anyhow!(e)).context("the agent stopped answering"),
        }
    }
}

/// What the rounds share.
struct State {
    /// Why each agent is down, if it is.
    down: Vec<Option<String>>,
    meta: Vec<Option<HostMeta>>,
    tests: Vec<PairTest>,
    done: usize,
}

/// Run the mesh.
pub fn run(opts: &Options, key: Option<&Key>) -> Outcomes {
    let n = opts.hosts.len();
    let progress = |s: &str| {
        if !opts.quiet {
            eprintln!("mesh: {s}");
        }
    };
    // Is every agent there, of this protocol, with this key?
    let checks: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = opts
            .hosts
            .iter()
            .map(|(_, a)| s.spawn(move || probe(a, key)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the check panicked".into()))
            })
            .collect()
    });
    for ((name, _), c) in opts.hosts.iter().zip(&checks) {
        if let Err(e) = c {
            progress(&format!("{name} is not available: {e}"));
        }
    }
    let set = pair_set(n, opts.pairs, opts.seed);
    let plan = rounds(n, &set, opts.concurrent);
    let due = set.len() * 2 * opts.tests.len();
    progress(&format!(
        "{n} agents, {} pairs, {} tests in {} round{}",
        set.len(),
        due,
        plan.len(),
        if plan.len() == 1 { "" } else { "s" }
    ));
    let state = Mutex::new(State {
        down: checks.iter().map(|c| c.clone().err()).collect(),
        meta: vec![None; n],
        tests: Vec::new(),
        done: 0,
    });
    let mut interrupted = false;
    for (r, round) in plan.iter().enumerate() {
        if crate::interrupt::requested() {
            interrupted = true;
            break;
        }
        progress(&format!(
            "round {}/{}: {} pairs",
            r + 1,
            plan.len(),
            round.len()
        ));
        // A thread per pair, at most MAX_AT_ONCE of them: each takes the next pair.
        let queue = Mutex::new(round.iter().copied());
        std::thread::scope(|s| {
            for _ in 0..round.len().min(MAX_AT_ONCE) {
                let (state, queue) = (&state, &queue);
                s.spawn(move || loop {
                    let next = queue.lock().expect("no panic holds it").next();
                    let Some((a, b)) = next else { return };
                    for (src, dst) in [(a, b), (b, a)] {
                        for test in &opts.tests {
                            if crate::interrupt::requested() {
                                return;
                            }
                            let t = one_test(opts, key, state, r, src, dst, test);
                            let mut st = state.lock().expect("no panic holds it");
                            st.done += 1;
                            st.tests.push(t);
                        }
                    }
                });
            }
        });
        let st = state.lock().expect("no panic holds it");
        let failed = st
            .tests
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Failed { .. }))
            .count();
        progress(&format!("{}/{} tests done, {failed} failed", st.done, due));
    }
    interrupted |= crate::interrupt::requested();
    let st = state.into_inner().expect("no panic holds it");
    let hosts = opts
        .hosts
        .iter()
        .zip(checks)
        .zip(st.meta)
        .map(|(((name, address), check), meta)| Host {
            name: name.clone(),
            address: address.clone(),
            meta,
            error: check.err(),
        })
        .collect();
    Outcomes {
        hosts,
        tests: st.tests,
        rounds: plan.len(),
        interrupted,
    }
}

/// One test of one ordered pair, from start to outcome.
fn one_test(
    opts: &Options,
    key: Option<&Key>,
    state: &Mutex<State>,
    round: usize,
    src: usize,
    dst: usize,
    test: &str,
) -> PairTest {
    let failed = |reason: String, started: u64| PairTest {
        source: src,
        destination: dst,
        test: test.to_string(),
        round,
        started_unix_ns: started,
        ended_unix_ns: now_ns().max(started),
        outcome: Outcome::Failed { reason },
    };
    let started = now_ns();
    let down = {
        let st = state.lock().expect("no panic holds it");
        [src, dst]
            .into_iter()
            .find_map(|h| st.down[h].as_ref().map(|why| (h, why.clone())))
    };
    if let Some((h, why)) = down {
        return failed(format!("agent {} is down: {why}", opts.hosts[h].0), started);
    }
    let msg = DriveMsg {
        workload: test.to_string(),
        target: opts.hosts[dst].1.clone(),
        duration_s: opts.duration_s,
        warmup_s: opts.warmup_s,
        parallel: if test == "tcp-stream" {
            opts.parallel
        } else {
            1
        },
        size: opts.size,
    };
    let wait = Duration::from_secs_f64(opts.duration_s + opts.warmup_s)
        + super::agent::GRACE
        + opts.timeout;
    let outcome = drive(&opts.hosts[src].1, key, &msg, wait);
    let result = match outcome {
        Ok(report) => {
            if let Some(mut meta) = report.host.clone() {
                // Another host's words: printable and bounded before they are shown.
                let clean = |s: &str| crate::control::wire::clean(s, 256);
                meta.hostname = clean(&meta.hostname);
                meta.kernel = clean(&meta.kernel);
                meta.cpu_model = meta.cpu_model.as_deref().map(clean);
                meta.congestion_control = meta.congestion_control.as_deref().map(clean);
                meta.route_device = meta.route_device.as_deref().map(clean);
                meta.offloads = meta
                    .offloads
                    .filter(|o| o.len() <= 256 && o.keys().all(|k| k.len() <= 64));
                let mut st = state.lock().expect("no panic holds it");
                st.meta[src].get_or_insert(meta);
            }
            let outcome = match (&report.error, &report.report) {
                (Some(e), _) => Outcome::Failed {
                    reason: crate::control::wire::clean(e, 1000),
                },
                (None, Some(r)) => match figures(r) {
                    Ok(f) => Outcome::Measured(f),
                    Err(e) => Outcome::Failed { reason: e },
                },
                (None, None) => Outcome::Failed {
                    reason: "the agent sent neither a report nor an error".into(),
                },
            };
            PairTest {
                source: src,
                destination: dst,
                test: test.to_string(),
                round,
                started_unix_ns: report.started_unix_ns,
                ended_unix_ns: report.ended_unix_ns,
                outcome,
            }
        }
        Err(e) => failed(format!("{e:#}"), started),
    };
    if matches!(result.outcome, Outcome::Failed { .. }) && !crate::interrupt::requested() {
        // Which of the two is gone, if either: later tests need not wait on it.
        for h in [src, dst] {
            if let Err(why) = probe(&opts.hosts[h].1, key) {
                let mut st = state.lock().expect("no panic holds it");
                st.down[h].get_or_insert(why);
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_take_the_default_port_and_keep_their_own() {
        let e = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_hosts(
                &e(&["10.0.0.1", "b:7000", "::1", "[fe80::1]", "[::1]:9", " "]),
                5290
            )
            .unwrap(),
            vec![
                ("10.0.0.1".to_string(), "10.0.0.1:5290".to_string()),
                ("b:7000".into(), "b:7000".into()),
                ("::1".into(), "[::1]:5290".into()),
                ("[fe80::1]".into(), "[fe80::1]:5290".into()),
                ("[::1]:9".into(), "[::1]:9".into()),
            ]
        );
        assert!(parse_hosts(&e(&["a:x"]), 1)
            .unwrap_err()
            .contains("bad port"));
        assert!(parse_hosts(&e(&["a:70000"]), 1)
            .unwrap_err()
            .contains("bad port"));
        assert!(parse_hosts(&e(&["a", "a:1"]), 1)
            .unwrap_err()
            .contains("twice"));
        assert!(parse_hosts(&e(&["a b"]), 1)
            .unwrap_err()
            .contains("HOST:PORT"));
    }

    #[test]
    fn one_host_under_two_spellings_is_in_the_mesh_once_as_first_given() {
        let hosts = |v: &[&str]| {
            parse_hosts(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 5290).unwrap()
        };
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        // A resolver of our own: names as a DNS would give them.
        let fake = |a: &str| match a {
            "localhost:5290" => vec![at("127.0.0.1:5290"), at("[::1]:5290")],
            "db:5290" => vec![at("10.0.0.1:5290")],
            "db:7000" => vec![at("10.0.0.1:7000")],
            "gone.invalid:5290" => vec![],
            other => resolve(other),
        };
        let (kept, notes) = dedupe_hosts(
            hosts(&[
                "localhost",
                "127.0.0.1",
                "::ffff:10.0.0.1",
                "db",
                "db:7000",
                "::1",
                "gone.invalid",
                "10.0.0.2",
            ]),
            fake,
        );
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        // 127.0.0.1 and ::1 are localhost; db is the mapped 10.0.0.1; another port is
        // another agent; a name that does not resolve stays.
        assert_eq!(
            names,
            [
                "localhost",
                "::ffff:10.0.0.1",
                "db:7000",
                "gone.invalid",
                "10.0.0.2"
            ]
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(
            notes[0],
            "127.0.0.1:5290 is the same agent as localhost:5290 (both reach 127.0.0.1:5290): \
             it is in the mesh once, as localhost"
        );
        assert!(
            notes[1].starts_with(
                "db:5290 is the same agent as [::ffff:10.0.0.1]:5290 (both reach 10.0.0.1:5290)"
            ),
            "{notes:?}"
        );
        assert!(
            notes[2].starts_with("[::1]:5290 is the same agent as localhost:5290"),
            "{notes:?}"
        );
    }

    #[test]
    fn localhost_and_127_0_0_1_resolve_to_one_agent() {
        let entries = ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]:5290"].map(String::from);
        let (kept, notes) = dedupe_hosts(parse_hosts(&entries, 5290).unwrap(), resolve);
        assert_eq!(
            kept,
            vec![("127.0.0.1".to_string(), "127.0.0.1:5290".to_string())]
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("localhost:5290 is the same agent as 127.0.0.1:5290"));
        assert_eq!(
            resolve("[::ffff:10.1.2.3]:9"),
            ["10.1.2.3:9".parse().unwrap()]
        );
        assert_eq!(resolve("no-such-host.invalid:9"), []);
    }

    #[test]
    fn a_hosts_file_skips_comments_and_blank_lines() {
        assert_eq!(
            hosts_file_entries("# agents\n10.0.0.1\n\n  10.0.0.2:7000  # rack 2\n#10.0.0.3\n"),
            ["10.0.0.1", "10.0.0.2:7000"]
        );
    }

    #[test]
    fn dns_gives_every_address_sorted() {
        let h = hosts_from_dns("localhost", 5290).unwrap();
        assert!(
            h.iter()
                .any(|(n, a)| n == "127.0.0.1" && a == "127.0.0.1:5290"),
            "{h:?}"
        );
        let mut sorted = h.clone();
        sorted.sort_by(|x, y| {
            x.1.parse::<SocketAddr>()
                .unwrap()
                .cmp(&y.1.parse().unwrap())
        });
        assert_eq!(h, sorted);
        // localhost is 127.0.0.1 and ::1 here: one agent, kept once, as IPv4.
        assert!(
            h.iter()
                .all(|(_, a)| a.parse::<SocketAddr>().unwrap().is_ipv4()),
            "{h:?}"
        );
        assert!(hosts_from_dns("no-such-host.invalid", 1).is_err());
        let v6 = hosts_from_dns("::1", 7).unwrap();
        assert_eq!(v6, vec![("::1".to_string(), "[::1]:7".to_string())]);
    }

    #[test]
    fn figures_come_from_the_clients_report_and_bad_ones_are_refused() {
        let report = serde_json::json!({"results": [{
            "bits_per_second": 1.5e9, "messages_per_second": 2000.0,
            "latencies": {"round_trip": {"p50_ns": 14000, "p99_ns": 80000}},
            "latency_buckets": {"round_trip": [{"le_ns": 16000, "count": 3}, {"le_ns": 100000, "count": 1}]},
            "delivered_fraction": 0.75
        }]});
        let f = figures(&report).unwrap();
        assert_eq!(f.bits_per_second, Some(1.5e9));
        assert_eq!(f.messages_per_second, Some(2000.0));
        assert_eq!(f.round_trip_p50_ns, Some(14000));
        assert_eq!(f.round_trip_p99_ns, Some(80000));
        assert_eq!(f.loss, Some(0.25));
        // The same in a document's body (an agent of this version).
        let doc = serde_json::json!({"kind": "stream", "body": report.clone()});
        assert_eq!(figures(&doc).unwrap(), f);
        // A pingpong: only the requests lost count from source to destination (its
        // delivered fraction also counts the replies lost and late on the way back).
        let pingpong = serde_json::json!({"results": [{
            "messages_sent": 1000, "requests_lost": 20, "replies_lost": 30, "delivered_fraction": 0.95
        }]});
        assert_eq!(figures(&pingpong).unwrap().loss, Some(0.02));
        let none_sent = serde_json::json!({"results": [{"messages_sent": 0, "requests_lost": 0}]});
        assert_eq!(figures(&none_sent).unwrap().loss, Some(0.0));
        assert_eq!(
            f.round_trip_buckets,
            vec![
                Bucket {
                    le_ns: 16000,
                    count: 3
                },
                Bucket {
                    le_ns: 100000,
                    count: 1
                }
            ]
        );
        let stream =
            serde_json::json!({"results": [{"bits_per_second": 1.0, "delivered_fraction": null}]});
        let f = figures(&stream).unwrap();
        assert_eq!((f.loss, f.round_trip_p50_ns), (None, None));
        assert!(f.round_trip_buckets.is_empty());
        for bad in [
            serde_json::json!({"results": []}),
            serde_json::json!({"results": [{"bits_per_second": -1.0}]}),
            serde_json::json!({"results": [{"bits_per_second": "fast"}]}),
            serde_json::json!({"results": [{"delivered_fraction": 1.5}]}),
            serde_json::json!({"results": [{"latency_buckets": {"round_trip": [{"le": 1}]}}]}),
            // A lying agent: figures no measurement gives, and counts that would
            // saturate the merged histogram.
            serde_json::json!({"results": [{"bits_per_second": 1e300}]}),
            serde_json::json!({"results": [{"bits_per_second": 1.0001e15}]}),
            serde_json::json!({"results": [{"messages_per_second": 1e11}]}),
            serde_json::json!({"results": [{"latencies": {"round_trip": {"p50_ns": 1e18}}}]}),
            serde_json::json!({"results": [{"latency_buckets": {"round_trip": [
                {"le_ns": 16000, "count": u64::MAX}, {"le_ns": 20000, "count": 2}]}}]}),
            serde_json::json!({"results": [{"latency_buckets": {"round_trip": [
                {"le_ns": 16000, "count": 3_600_000_000_001u64}]}}]}),
            serde_json::json!({"results": [{"latency_buckets": {"round_trip": [
                {"le_ns": u64::MAX, "count": 1}]}}]}),
        ] {
            let e = figures(&bad)
                .err()
                .unwrap_or_else(|| panic!("accepted {bad}"));
            assert!(e.len() < 200, "{e}");
        }
        // The bounds themselves are figures.
        let at = serde_json::json!({"results": [{"bits_per_second": 1e15,
            "latency_buckets": {"round_trip": [{"le_ns": 16000, "count": 3_600_000_000_000u64}]}}]});
        assert!(figures(&at).is_ok());
    }
}

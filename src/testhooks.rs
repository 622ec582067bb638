//! Faults and pauses that only a test build can ask for (Cargo feature `test-hooks`, off in
//! every shipped binary). The tests use them to prove that a check fires (a receiver that
//! miscounts must be caught by the agreement check) and to hold a named object (a socket
//! file, FIFO, message queue or shared-memory ring) in existence long enough to interrupt
//! or kill the run while it exists. Without the feature both functions are constants the
//! compiler removes.
//!
//! - `SOCKBENCH_TEST_FAULT=NAME[,NAME...]`: [`fault`] returns true for each NAME.
//! - `SOCKBENCH_TEST_HOLD=POINT:MS`: [`hold`] at POINT sleeps MS milliseconds (or until
//!   Ctrl-C), after printing `holding POINT` to stderr. With MS 0 it only marks the
//!   moment. The points: `plan` (the host probed, the plan not made), `warmup` and `run`
//!   (before a scenario's warm-up and each measured run), `unix`, `fifo`, `mq`, `shm`
//!   (a receiving half's name made, the other end not open), `receive` (a stream
//!   receiver at the start line, before its first read: a peer that stops reading),
//!   `server-ready`, `server-wired`, `server-result` (a run's server side before it sends
//!   its endpoints, its roles' readiness, its result), `export-fifo` (an export waiting
//!   for a FIFO's reader), `serve-listen` (serve bound, before it says where),
//!   `relay-run` (relay's sources at their start line) and `relay-end` (a relay worker,
//!   thread `sb-relay`, that has measured its CPU time and not yet ended).
//! - `SOCKBENCH_TEST_FORGE_ENDPOINT=JSON`: [`forged_endpoint`], what a hostile peer
//!   names for its data in place of its own endpoints.
//! - Fault `shallow-queue`: every message queue this process makes holds 2 messages, as
//!   on a machine whose `fs.mqueue.msg_max` is 2 (a server with a lower limit than its
//!   client's).
//! - Fault `alternate-cpus`: [`alternate_cpus`] pins the roles of the 1st, 3rd, ... run of
//!   the process to CPUs 0,0 and those of the 2nd, 4th, ... to 0,1 (threads placement;
//!   with `--warmup 0`, as a warm-up is a run too), for a bimodal result on purpose.
//! - `SOCKBENCH_TEST_SLOW=POINT:US`: [`slow`] at POINT sleeps US microseconds, every
//!   time, a slowdown on purpose that `compare` must see: `relay-copy` (each read of the
//!   `read-write` relay method), `load-send` (each request `load` sends) and
//!   `swarm-step` (each turn of the swarm's event loop).
//! - `SOCKBENCH_TEST_STAMP_CAP=N`: [`stamp_cap`], the most `--timestamps` records a role
//!   keeps per run (at most the real cap), so a short run is sampled for certain.

/// Whether the test asked for fault `name`.
#[cfg(feature = "test-hooks")]
pub fn fault(name: &str) -> bool {
    std::env::var("SOCKBENCH_TEST_FAULT").is_ok_and(|v| v.split(',').any(|f| f == name))
}

/// Whether the test asked for fault `name` (never, in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn fault(_name: &str) -> bool {
    false
}

/// Pause at `point` if the test asked for it.
#[cfg(feature = "test-hooks")]
pub fn hold(point: &str) {
    let Ok(spec) = std::env::var("SOCKBENCH_TEST_HOLD") else {
        return;
    };
    let Some(ms) = spec
        .split_once(':')
        .filter(|(p, _)| *p == point)
        .and_then(|(_, ms)| ms.parse::<u64>().ok())
    else {
        return;
    };
    eprintln!("holding {point}");
    let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    while std::time::Instant::now() < until && !crate::interrupt::requested() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Pause at `point` if the test asked for it (never, in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn hold(_point: &str) {}

/// Slow down at `point`, every time, if the test asked for it.
#[cfg(feature = "test-hooks")]
pub fn slow(point: &str) {
    static SLOW: std::sync::OnceLock<Option<(String, std::time::Duration)>> =
        std::sync::OnceLock::new();
    let asked = SLOW.get_or_init(|| {
        let spec = std::env::var("SOCKBENCH_TEST_SLOW").ok()?;
        let (p, us) = spec.split_once(':')?;
        Some((
            p.to_string(),
            std::time::Duration::from_micros(us.parse().ok()?),
        ))
    });
    if let Some((p, d)) = asked {
        if p == point {
            std::thread::sleep(*d);
        }
    }
}

/// Slow down at `point` if the test asked for it (never, in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn slow(_point: &str) {}

/// The endpoint a hostile peer names (`SOCKBENCH_TEST_FORGE_ENDPOINT`, an endpoint as JSON:
/// `{"path": ...}`, `{"address": ...}`, `{"name": ...}`) in place of every endpoint this
/// side announces for its data (a server's `Ready`, a client's `Wired`), so a test can
/// play the peer that names what it should not.
#[cfg(feature = "test-hooks")]
pub fn forged_endpoint() -> Option<String> {
    std::env::var("SOCKBENCH_TEST_FORGE_ENDPOINT").ok()
}

/// The endpoint a hostile peer names (never, in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn forged_endpoint() -> Option<String> {
    None
}

/// With fault `alternate-cpus`: the CPUs (sender, receiver) of this run, alternately
/// 0,0 and 0,1.
#[cfg(feature = "test-hooks")]
pub fn alternate_cpus() -> Option<(usize, usize)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static RUNS: AtomicU64 = AtomicU64::new(0);
    if !fault("alternate-cpus") {
        return None;
    }
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    Some(if n % 2 == 0 { (0, 0) } else { (0, 1) })
}

/// The CPUs of this run (never pinned by a test, in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn alternate_cpus() -> Option<(usize, usize)> {
    None
}

/// `SOCKBENCH_TEST_STAMP_CAP`: the most timestamp records a role keeps (read once).
#[cfg(feature = "test-hooks")]
pub fn stamp_cap() -> Option<usize> {
    static CAP: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| {
        std::env::var("SOCKBENCH_TEST_STAMP_CAP")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
    })
}

/// The most timestamp records a role keeps (the real cap, in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn stamp_cap() -> Option<usize> {
    None
}
